#if canImport(NIOSSL)
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import Synchronization

/// A real HTTPS/1.1 server on 127.0.0.1 (SwiftNIO + NIOSSL) with the certificate in
/// Tests/Fixtures/tls (made by Scripts/make-test-tls): it answers every request with one body and
/// counts the requests. Clients trust it through ``caFile``.
public final class LoopbackHTTPSServer: Sendable {
    /// The PEM file of the CA that signed the server's certificate.
    public static var caFile: String { PackagePaths.root.appendingPathComponent("Tests/Fixtures/tls/ca.pem").path }

    private let channel: any Channel
    private let counter = Counter()
    public let port: Int

    /// Starts a server that answers `status` with `body` (as application/json) and `headers`;
    /// with `tls12Only`, it speaks TLS 1.2 and nothing newer.
    public init(status: Int = 200, headers: [(String, String)] = [], body: [UInt8], tls12Only: Bool = false) throws {
        let tls = PackagePaths.root.appendingPathComponent("Tests/Fixtures/tls")
        var configuration = TLSConfiguration.makeServerConfiguration(
            certificateChain: try NIOSSLCertificate.fromPEMFile(tls.appendingPathComponent("server.pem").path).map {
                .certificate($0)
            },
            privateKey: .privateKey(
                try NIOSSLPrivateKey(file: tls.appendingPathComponent("server-key.pem").path, format: .pem)))
        if tls12Only {
            configuration.minimumTLSVersion = .tlsv12
            configuration.maximumTLSVersion = .tlsv12
        }
        let context = try NIOSSLContext(configuration: configuration)
        let counter = self.counter
        let answer = Answer(status: HTTPResponseStatus(statusCode: status), headers: headers, body: body)
        channel = try ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: context))
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(Responder(answer: answer, counter: counter))
                }
            }
            .bind(host: "127.0.0.1", port: 0).wait()
        port = channel.localAddress?.port ?? 0
    }

    deinit { try? channel.close().wait() }

    /// `https://127.0.0.1:<port><path>`.
    public func url(_ path: String = "/") -> String { "https://127.0.0.1:\(port)\(path)" }

    /// How many requests have arrived.
    public var requestCount: Int { counter.requests.load(ordering: .acquiring) }

    private struct Answer: Sendable {
        let status: HTTPResponseStatus
        let headers: [(String, String)]
        let body: [UInt8]
    }

    private final class Counter: Sendable {
        let requests = Atomic(0)
        func count() { requests.add(1, ordering: .acquiringAndReleasing) }
    }

    private final class Responder: ChannelInboundHandler, @unchecked Sendable {
        typealias InboundIn = HTTPServerRequestPart
        typealias OutboundOut = HTTPServerResponsePart
        let answer: Answer
        let counter: Counter

        init(answer: Answer, counter: Counter) {
            self.answer = answer
            self.counter = counter
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            guard case .end = unwrapInboundIn(data) else { return }
            counter.count()
            var headers = HTTPHeaders(answer.headers)
            headers.add(name: "Content-Type", value: "application/json")
            headers.add(name: "Content-Length", value: String(answer.body.count))
            context.write(
                wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: answer.status, headers: headers))),
                promise: nil)
            context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(bytes: answer.body)))), promise: nil)
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        }
    }
}
#endif
