import ArgumentParser
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import ShadowApple
import ShadowCore
import ShadowCredentials
import ShadowJOSE

struct StateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "state",
        abstract: "Track each user's credential state (authorized, revoked, transferred, notFound) in the vault.",
        discussion: """
            State lives in the vault (--vault and its key options, as for `vault`); every transition is \
            also appended to a hash-chained audit log, the vault's path plus ".audit". Events apply in \
            the order of their own times, whatever order they arrive in; duplicates change nothing. \
            Exit codes: 0; 14 not authorized (check) or token superseded by a revocation (apply-token); \
            10-13 token or notification rejected, as for verify-token; 30 wrong key; 31 vault or audit \
            log corrupted or tampered; 33 lock timeout; 64 usage; 66 no vault. See Docs/credential-state.md.
            """,
        subcommands: [Show.self, Check.self, ApplyNotification.self, ApplyToken.self, RecordRefresh.self, RecordMigration.self, History.self, Audit.self]
    )
}
