import ArgumentParser
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import ShadowCore
import ShadowJOSE
import ShadowJWKS

struct JWKSCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "jwks",
        abstract: "Fetch, inspect and clear cached JWK Sets.",
        subcommands: [Fetch.self, Show.self, Clear.self, FromKey.self]
    )
}
