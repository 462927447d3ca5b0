import ArgumentParser
import ShadowCore
import ShadowJOSE

struct Decode: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print a token's header and payload WITHOUT verifying anything.",
        discussion: "Exits 0, or 10 when the token is malformed. A warning on stderr says nothing was verified."
    )

    @Argument(help: "The token, or '-' to read it from stdin.")
    var token: String?

    @Option(name: .customLong("token-file"), help: "Read the token from this file.")
    var tokenFile: String?

    @Option(name: .customLong("token-env"), help: "Read the token from this environment variable.")
    var tokenEnvironment: String?

    @Option(name: .customLong("max-token-bytes"), help: "Largest accepted token, in bytes.")
    var maxTokenBytes: Int = CompactJWS.defaultMaxBytes

    private var tokenInput: TokenInput { TokenInput(argument: token, file: tokenFile, environmentVariable: tokenEnvironment) }

    func validate() throws { try tokenInput.validate() }

    func run() async throws {
        try await reportingFailures(json: false) {
            let jws = try CompactJWS(try tokenInput.read(), maxBytes: maxTokenBytes)
            let payload = try jws.unverifiedPayload()
            Console.err("shadow-keys: warning: decoded only; the signature and claims were NOT verified")
            Console.json(["header": .object(jws.header.json), "payload": .object(payload)])
        }
    }
}
