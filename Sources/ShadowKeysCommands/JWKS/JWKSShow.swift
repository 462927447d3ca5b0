import ArgumentParser
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import ShadowCore
import ShadowJOSE
import ShadowJWKS

extension JWKSCommand {
    struct Show: AsyncParsableCommand, QuietCommand {
        static let configuration = CommandConfiguration(
            commandName: "show",
            abstract:
                """
                Show a cached (URL) or local (FILE) JWK Set: kids, types, algorithms, RFC 7638 thumbprints, age and \
                TTL.
                """,
            discussion:
                "Never fetches. Exits 0, or 13 when there is nothing cached for the URL or the file is unusable."
        )

        @Argument(help: "An https:// URL (its cache) or a JWK Set file ('-' for stdin).")
        var source: String

        @Flag(help: "Print JSON.")
        var json = false

        @Flag(name: .shortAndLong, help: "Print no warnings on stderr.") var quiet = false

        func run() async throws {
            try await reportingFailures(json: json) {
                if KeySourceOptions.isURL(source) {
                    let provider = try keySetProvider(url: source, network: .offline, offline: true)
                    let status = try provider.status
                    guard status.snapshot.lastAttempt != nil || status.keySet != nil else {
                        throw CLIError(
                            .keysUnavailable, "nothing is cached for \(source); run `shadow-keys jwks fetch \(source)`")
                    }
                    try printStatus(source: source, status: status, json: json)
                } else {
                    let set = try readKeySet(source)
                    printKeySet(source: source, set: set, extra: [], json: json)
                }
            }
        }
    }
}
