import ArgumentParser

@main
struct ShadowKeysCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "shadow-keys",
        abstract: "Verify JWTs, check keys and vectors: the ShadowKeys command line.",
        discussion: """
            Exit codes: 0 success, 10 malformed token, 11 signature rejected, 12 claims rejected,
            13 keys unavailable, 20 authentication failed (decryption), 30/31/32/33 vault: wrong
            passphrase or key / corrupted / no such entry / lock timeout, 40/41/42 Apple refused the
            grant / refused the request / was unavailable, 64 usage error,
            65 malformed input, 66 input cannot be opened, 73 output exists (keygen), 1 anything
            else. See Docs/cli.md.
            """,
        version: "0.1.0",
        subcommands: [VerifyToken.self, Decode.self, JWKSCommand.self, ClientSecretCommand.self, AppleCommand.self, Keygen.self, DeriveKey.self, Encrypt.self, Decrypt.self, Rewrap.self, Hash.self, VaultCommand.self, StateCommand.self, SelfTestCommand.self]
    )
}
