import ArgumentParser
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import ShadowApple
import ShadowCore
import ShadowCrypto
import ShadowJOSE
import ShadowJWKS

struct AppleCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "apple",
        abstract:
            """
            Sign in with Apple server flows: token exchange, refresh validation, revocation, migration, notifications.
            """,
        discussion: """
            Exit codes: 0 success, 40 invalid_grant (code or token expired, used or revoked), 41 Apple \
            refused the request (invalid_client, invalid_request, …), 42 Apple unavailable (5xx or no \
            answer after retries), 11/12/13 id_token or notification verification failed, 64 usage, \
            65 .p8 key unreadable or wrong.
            """,
        subcommands: [Token.self, Refresh.self, Revoke.self, Migrate.self, Notification.self]
    )
}
