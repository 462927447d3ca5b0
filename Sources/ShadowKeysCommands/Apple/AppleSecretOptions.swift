import ArgumentParser
import ShadowCore

/// `--code-stdin`, `--code-file F`, `--code-env VAR`: an authorization code (never argv).
struct CodeOptions: ParsableArguments {
    @Flag(name: .customLong("code-stdin"), help: "Read the authorization code from stdin.") var stdin = false
    @Option(name: .customLong("code-file"), help: "Read the authorization code from this file.") var file: String?
    @Option(name: .customLong("code-env"), help: "Read the authorization code from this environment variable.")
    var environment: String?

    func validate() throws { _ = try input() }

    func input() throws -> SecretInput {
        let options = "--code-stdin, --code-file or --code-env (never on the command line)"
        guard let origin = try oneOrigin(origins(stdin: stdin, file: file, environment: environment), options: options)
        else {
            throw ValidationError("give the code with one of \(options)")
        }
        return SecretInput(origin: origin, what: "code")
    }
}

/// `--token-stdin`, `--token-file F`, `--token-env VAR`: a refresh or access token (never argv).
struct BearerTokenOptions: ParsableArguments {
    @Flag(name: .customLong("token-stdin"), help: "Read the token from stdin.") var stdin = false
    @Option(name: .customLong("token-file"), help: "Read the token from this file.") var file: String?
    @Option(name: .customLong("token-env"), help: "Read the token from this environment variable.") var environment:
        String?

    func validate() throws { _ = try input() }

    func input() throws -> SecretInput {
        let options = "--token-stdin, --token-file or --token-env (never on the command line)"
        guard let origin = try oneOrigin(origins(stdin: stdin, file: file, environment: environment), options: options)
        else {
            throw ValidationError("give the token with one of \(options)")
        }
        return SecretInput(origin: origin, what: "token")
    }
}
