import ArgumentParser
import ShadowCore
import ShadowJOSE

struct Decode: AsyncParsableCommand, QuietCommand {
    static let configuration = CommandConfiguration(
        commandName: "decode",
        abstract: "Print a token's header and payload WITHOUT verifying anything.",
        discussion: "Exits 0, or 10 when the token is malformed. A warning on stderr says nothing was verified."
    )

    @OptionGroup var token: TokenOptions

    @Option(name: .customLong("max-token-bytes"), help: "Largest accepted token, in bytes (1 to 1048576).")
    var maxTokenBytes: Int = CompactJWS.defaultMaxBytes

    @Flag(name: .shortAndLong, help: "Print no warnings.")
    var quiet = false

    func validate() throws {
        try token.requireInput()
        guard (1...TokenOptions.readLimit).contains(maxTokenBytes) else {
            throw ValidationError("--max-token-bytes: 1 to \(TokenOptions.readLimit)")
        }
    }

    func run() async throws {
        try await reportingFailures(json: false) {
            let jws = try CompactJWS(try token.read(), maxBytes: maxTokenBytes)
            let payload = try jws.unverifiedPayload()
            Console.warn("decoded only; the signature and claims were NOT verified")
            Console.json(["header": .object(jws.header.json), "payload": .object(payload)])
        }
    }
}
