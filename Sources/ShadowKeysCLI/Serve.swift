import ArgumentParser
import Hummingbird
import Logging
import NIOCore
import ShadowApple
import ShadowCore
import ShadowCredentials
import ShadowHummingbird
import ShadowJOSE

struct Serve: AsyncParsableCommand, QuietCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Receive Sign in with Apple server-to-server notifications over HTTP (TLS from a reverse proxy).",
        discussion: """
            POST /apple/notifications takes Apple's body ({"payload":"<JWT>"}) and answers 200 (applied, \
            duplicate, or an undocumented type), 400 (not JSON, no payload, malformed token), 401 \
            (signature or claims rejected, or issued more than --max-age ago), 413 (over 64 KiB) or \
            503 (Apple's keys or the store unavailable), each with a JSON body. GET /healthz answers \
            200 {"status":"ok"} while the store answers, else 503. Logs go to stderr. SIGTERM or SIGINT \
            stop taking connections and finish the requests in flight. See Docs/server.md.
            """)

    @Option(help: ArgumentHelp("Address and port to listen on.", valueName: "host:port")) var listen = "127.0.0.1:8080"
    @Option(name: .customLong("client-id"), help: "A client ID (Services ID or bundle ID) notifications may be for; repeatable.") var clientIDs: [String] = []
    @Option(name: .customLong("max-age"), help: "Refuse notifications issued longer ago than this, seconds (60 to 604800).") var maxAge: Double = 86_400
    @OptionGroup var keySource: KeySourceOptions
    @OptionGroup var store: StoreOptions

    /// The listen address, checked.
    func address() throws -> (host: String, port: Int) {
        guard let colon = listen.lastIndex(of: ":"), let port = Int(listen[listen.index(after: colon)...]), (1...65535).contains(port) else {
            throw ValidationError("--listen: host:port with a port of 1 to 65535, not \(listen.quotedForMessage)")
        }
        var host = String(listen[..<colon])
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard !host.isEmpty else { throw ValidationError("--listen: no host in \(listen.quotedForMessage)") }
        return (host, port)
    }

    @Flag(name: .shortAndLong, help: "Print no warnings on stderr.") var quiet = false

    func validate() throws {
        _ = try address()
        guard !clientIDs.isEmpty else { throw ValidationError("give at least one --client-id: the client IDs notifications may be for") }
        guard (60...604_800).contains(maxAge) else { throw ValidationError("--max-age: 60 to 604800 seconds") }
        try keySource.validate(default: Apple.keysURL)
        if keySource.jwks == "-" { throw ValidationError("--jwks -: a server reads its keys from a URL or a file") }
        try store.requireKey()
    }

    func run() async throws {
        try await reportingFailures(json: false) {
            LoggingSystem.bootstrap { StreamLogHandler.standardError(label: $0) }
            var logger = Logger(label: "shadow-keys.serve")
            logger.logLevel = .info
            let keys = try keySource.keys(default: Apple.keysURL)
            let states = try await store.open(create: true)
            let receiver = AppleNotificationReceiver(clientIDs: clientIDs, keys: keys, store: states, maxAge: maxAge, logger: logger)
            let router = Router()
            router.addAppleNotifications(receiver: receiver)
            router.get("healthz") { _, _ -> Response in
                let healthy = (try? await states.status(clientID: "healthz", subject: "healthz")) != nil
                return Response(status: healthy ? .ok : .serviceUnavailable, headers: [.contentType: "application/json"],
                                body: .init(byteBuffer: ByteBuffer(string: healthy ? #"{"status":"ok"}"# : #"{"status":"store_unavailable"}"#)))
            }
            let (host, port) = try address()
            let app = Application(router: router, configuration: .init(address: .hostname(host, port: port), serverName: "shadow-keys"), logger: logger)
            do {
                try await app.runService()
            } catch {
                await close(states)
                throw CLIError(.failure, code: "serve_failed", "serving on \(listen) failed: \(error)")
            }
            await close(states)
        }
    }
}
