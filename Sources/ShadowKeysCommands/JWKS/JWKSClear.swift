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
    struct Clear: AsyncParsableCommand, QuietCommand {
        static let configuration = CommandConfiguration(
            commandName: "clear", abstract: "Delete cached JWK Sets: one URL's, or all of them.")

        @Argument(help: "The URL whose cache to delete; without it, every cached key set.")
        var url: String?

        @Flag(name: .shortAndLong, help: "Print no warnings on stderr.") var quiet = false

        func run() async throws {
            try await reportingFailures(json: false) {
                let directory = try cacheDirectory()
                if let url {
                    try FileKeySetStore(url: url, directory: directory).remove()
                    Console.out("cleared \(url)")
                    return
                }
                let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
                var removed = 0
                for name in names where name.hasSuffix(".json") || name.hasSuffix(".lock") {
                    try FileManager.default.removeItem(atPath: directory + "/" + name)
                    if name.hasSuffix(".json") { removed += 1 }
                }
                Console.out("cleared \(removed) cached key set\(removed == 1 ? "" : "s") from \(directory)")
            }
        }
    }
}
