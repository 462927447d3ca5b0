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
    struct Fetch: AsyncParsableCommand, QuietCommand {
        static let configuration = CommandConfiguration(
            commandName: "fetch",
            abstract: "Fetch a JWK Set now (conditionally) into the on-disk cache.",
            discussion: "Exits 0, 13 when the fetch fails, or 64 for a forbidden URL."
        )

        @Argument(help: "The https:// URL of the key set.")
        var url: String

        @OptionGroup var network: NetworkOptions

        @Flag(help: "Print JSON.")
        var json = false

        @Flag(name: .shortAndLong, help: "Print no warnings on stderr.") var quiet = false

        func validate() throws {
            try network.check(url, option: "URL")
        }

        func run() async throws {
            try await reportingFailures(json: json) {
                let provider = try keySetProvider(url: url, network: network, offline: false)
                try await provider.refresh()
                try printStatus(source: url, status: try provider.status, json: json)
            }
        }
    }
}
