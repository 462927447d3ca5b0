package import ArgumentParser
import ShadowApple
import ShadowCore
package import ShadowJOSE
import ShadowJWKS

/// `--jwks URL|FILE|-` with its fetching options, shared by every command that verifies.
package struct KeySourceOptions: ParsableArguments {
    package init() {}

    @Option(name: .customLong("jwks"), help: "The JWK Set: an https:// URL (cached on disk), a file, or '-' for stdin.")
    package var jwks: String?

    @Flag(help: "Use only the on-disk cache for a URL; never fetch.")
    var offline = false

    @OptionGroup package var network: NetworkOptions

    /// True for `scheme://…`: such a value is a URL (and must pass the URL policy), never a file name.
    static func isURL(_ value: String) -> Bool {
        let parts = value.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
        guard parts.count == 2, parts[1].hasPrefix("//") else { return false }
        let scheme = parts[0].unicodeScalars
        func isSchemeCharacter(_ scalar: Unicode.Scalar) -> Bool {
            scalar.properties.isAlphabetic || ("0"..."9").contains(scalar) || scalar == "+" || scalar == "-"
                || scalar == "."
        }
        return !scheme.isEmpty && scheme.allSatisfy(isSchemeCharacter)
    }

    /// Checks a URL source now, so a forbidden URL is a usage error (64).
    /// `networkUsedElsewhere`: the command also fetches other URLs with the network options
    /// (`serve`'s `--base-url`), so they are not an error beside a key-set file.
    package func validate(default defaultSource: String?, networkUsedElsewhere: Bool = false) throws {
        guard let source = jwks ?? defaultSource else { throw ValidationError("--jwks URL|FILE|- is required") }
        if Self.isURL(source) {
            try network.check(source, option: "--jwks")
        } else if offline || (network.isSet && !networkUsedElsewhere) {
            throw ValidationError("--offline, --allow-http-loopback and --ca-file apply to a --jwks URL only")
        }
    }

    /// The configured key source: a fetched, disk-cached set for a URL; a local set for a file or stdin.
    package func keys(default defaultSource: String? = nil) throws -> any JWKSource {
        try keys(default: defaultSource, tls13: false)
    }

    /// Apple's key set: `--jwks`, else Apple's URL; a URL (a mirror included) is fetched over TLS
    /// 1.3 only, as Apple requires for its APIs.
    package func appleKeys() throws -> any JWKSource {
        try keys(default: Apple.keysURL, tls13: true)
    }

    private func keys(default defaultSource: String?, tls13: Bool) throws -> any JWKSource {
        guard let source = jwks ?? defaultSource else { throw CLIError(.usage, "--jwks URL|FILE|- is required") }
        return Self.isURL(source)
            ? try keySetProvider(url: source, network: network, offline: offline, tls13: tls13) : try readKeySet(source)
    }
}

/// The disk-cached provider the CLI uses for a URL. A cache folder that another user could write
/// to is not used (with a warning): the key set is then fetched for this run only.
func keySetProvider(url: String, network: NetworkOptions, offline: Bool, tls13: Bool = false) throws -> JWKSProvider {
    var configuration = JWKSProvider.Configuration(url: url)
    configuration.requiresTLS13 = tls13
    configuration.allowLoopbackHTTP = network.allowHTTPLoopback
    var store: FileKeySetStore? = FileKeySetStore(url: url, directory: try cacheDirectory())
    if let problem = store?.directoryProblem {
        Console.warn("not using the key-set cache: \(problem)")
        store = nil
    }
    do {
        return try JWKSProvider(
            configuration: configuration, transport: offline ? nil : try network.transport(), store: store)
    } catch let error as HTTPTransportError {
        throw CLIError(.usage, "--jwks: \(error.message)")
    }
}

/// The key-set cache folder; a usage error (64) when the environment names none.
func cacheDirectory() throws -> String {
    do { return try FileKeySetStore.defaultDirectory() } catch let error as JWKSError {
        throw CLIError(.usage, code: error.codeName, error.reason)
    }
}

/// Reads a JWK Set from a file or stdin: exit 66 when it cannot be opened, 13 when it is not a
/// usable key set.
func readKeySet(_ source: String) throws -> JWKSet {
    let bytes: [UInt8]
    do {
        let input =
            source == "-"
            ? try Files.readAll(0, limit: JWKSet.maxDocumentBytes, path: "stdin")
            : try Files.read(source, limit: JWKSet.maxDocumentBytes)
        guard let input else {
            throw CLIError(.keysUnavailable, "JWKS \(source) exceeds \(JWKSet.maxDocumentBytes) bytes")
        }
        bytes = input
    } catch let error as FileError {
        throw CLIError(.noInput, "cannot read the JWKS: \(error)")
    }
    let set: JWKSet
    do { set = try JWKSet(json: bytes) } catch let error as JOSEError {
        throw CLIError(.keysUnavailable, code: error.codeName, "JWKS \(source): \(error.reason)")
    }
    guard !set.keys.isEmpty else {
        let reasons = set.skipped.map(\.description).joined(separator: "; ")
        throw CLIError(
            .keysUnavailable, "JWKS \(source) has no usable keys" + (reasons.isEmpty ? "" : " (skipped: \(reasons))"))
    }
    return set
}
