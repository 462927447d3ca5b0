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
        abstract: "Track each user's credential state (authorized, revoked, transferred, notFound).",
        discussion: """
            State lives in a store: --store sqlite:PATH (the default, under $XDG_DATA_HOME/shadow-keys/), \
            --store postgres://… for several servers, or --store vault:PATH (also --vault PATH); \
            $SHADOW_KEYS_STATE_STORE sets the default. The key options (as for `vault`) open it. Every \
            transition is also appended to a hash-chained audit log in the store. Events apply in the \
            order of their own times, whatever order they arrive in; duplicates change nothing. \
            Exit codes: 0; 14 not authorized (check) or token superseded by a revocation (apply-token); \
            10-13 token or notification rejected, as for verify-token; 30 wrong key; 31 store or audit \
            log corrupted or tampered; 33 lock timeout; 34 database unreachable; 64 usage; 65 bad event \
            input; 66 no store. See Docs/credential-state.md.
            """,
        subcommands: [
            Show.self, Check.self, ApplyNotification.self, ApplyToken.self, ApplyEvents.self, RecordRefresh.self,
            RecordMigration.self, History.self, Audit.self,
            Migrate.self, MigrateSchema.self,
        ]
    )
}
