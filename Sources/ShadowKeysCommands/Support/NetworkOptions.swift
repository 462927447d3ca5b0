import ArgumentParser
import ShadowHTTP
package import ShadowJWKS

/// How the commands that fetch reach the network: `--allow-http-loopback` and `--ca-file`.
/// Proxies come from `HTTPS_PROXY` and `NO_PROXY`, as in curl (Docs/cli.md).
package struct NetworkOptions: ParsableArguments {
    package init() {}

    @Flag(
        name: .customLong("allow-http-loopback"),
        help: "Allow plain http:// to 127.0.0.1 or ::1 (tests, local mirrors).")
    package var allowHTTPLoopback = false

    @Option(
        name: .customLong("ca-file"),
        help: ArgumentHelp("Trust the CA certificates in this PEM file besides the system's.", valueName: "pem"))
    var caFile: String?

    /// Options for reading a cache only: loopback URLs accepted, nothing fetched.
    static var offline: NetworkOptions {
        var options = NetworkOptions()
        options.allowHTTPLoopback = true
        return options
    }

    /// True when either option was given.
    var isSet: Bool { allowHTTPLoopback || caFile != nil }

    /// Checks `url` against the URL policy: a forbidden URL is a usage error (64).
    package func check(_ url: String, option: String) throws {
        do { try URLPolicy.check(url, allowLoopbackHTTP: allowHTTPLoopback) } catch let error as HTTPTransportError {
            throw ValidationError("\(option): \(error.message)")
        }
    }

    /// The transport: its clients start on the first request, so a run served from the cache starts none.
    package func transport() throws -> any HTTPTransport {
        #if canImport(Darwin)
        guard caFile == nil else {
            throw CLIError(
                .usage, "--ca-file is not supported on this platform; add the CA to the system's trust settings")
        }
        return URLSessionTransport(allowLoopbackHTTP: allowHTTPLoopback)
        #else
        if case .failure(let error)? = ProxySettings.fromEnvironment().https {
            throw CLIError(.usage, code: "proxy", error.message)
        }
        do {
            return try AsyncHTTPClientTransport(
                options: .init(allowLoopbackHTTP: allowHTTPLoopback, additionalTrustRootsFile: caFile))
        } catch let error as HTTPTransportError {
            throw CLIError(.noInput, "--ca-file: \(error.message)")
        }
        #endif
    }
}
