import ArgumentParser

@main
struct ShadowKeysCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "shadow-keys",
        abstract: "Verify JWTs, check keys and vectors: the ShadowKeys command line.",
        discussion: """
            Exit codes: 0 success, 10 malformed token, 11 signature rejected, 12 claims rejected,
            13 keys unavailable, 64 usage error, 1 anything else. See Docs/cli.md.
            """,
        version: "0.1.0",
        subcommands: [VerifyToken.self, Decode.self, JWKSCommand.self, SelfTestCommand.self]
    )
}
