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
    struct Fetch: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Fetch a JWK Set now (conditionally) into the on-disk cache.",
            discussion: "Exits 0, 13 when the fetch fails, or 64 for a forbidden URL."
        )

        @Argument(help: "The https:// URL of the key set.")
        var url: String

        @Flag(name: .customLong("allow-http-loopback"), help: "Allow plain http:// to 127.0.0.1 or ::1.")
        var allowHTTPLoopback = false

        @Flag(help: "Print JSON.")
        var json = false

        func validate() throws {
            do { try URLPolicy.check(url, allowLoopbackHTTP: allowHTTPLoopback) } catch let error as HTTPTransportError {
                throw ValidationError(error.message)
            }
        }

        func run() async throws {
            try await reportingFailures(json: json) {
                let provider = try keySetProvider(url: url, allowHTTPLoopback: allowHTTPLoopback, offline: false)
                try await provider.refresh()
                try printStatus(source: url, status: try provider.status, json: json)
            }
        }
    }
}
