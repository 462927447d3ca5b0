public import HummingbirdCore
public import Logging
public import NIOCore
import HTTPTypes
import NIOHTTPTypes
import Synchronization

/// A connection limit that makes room for new clients by closing idle connections (Docs/server.md,
/// "Slow clients"): when a new connection takes the last place, the oldest connection that has not
/// sent a request head is closed, else the oldest kept alive between requests; a connection with
/// a request in progress is never closed for room. So a thousand idle clients cannot keep a valid
/// request waiting for their idle timeouts. It also closes a connection right after a response
/// that says `Connection: close` is sent (a refused body is never read as the next request).
///
/// Give ``delegate`` to the server's `availableConnectionsDelegate` and ``channelHandlers()`` to
/// its HTTP/1 configuration's `additionalChannelHandlers`.
public final class ConnectionLimit: Sendable {
    /// The most connections open at once.
    public let maximum: Int
    let logger: Logger
    private let registry = Mutex(Registry())

    struct Entry {
        let channel: any Channel
        /// When it was accepted, or last finished a response.
        var since: ContinuousClock.Instant
        /// Whether a request head has arrived on it since.
        var inRequest: Bool
        /// Whether it has ever sent a request head.
        var served: Bool
    }

    struct Registry {
        var entries: [ObjectIdentifier: Entry] = [:]
        var open = 0
    }

    public init(maximum: Int, logger: Logger) {
        self.maximum = max(1, maximum)
        self.logger = logger
    }

    /// The server's `availableConnectionsDelegate`.
    public var delegate: Delegate { Delegate(limit: self) }

    /// The handlers that track each connection's state (one per connection).
    public func channelHandlers() -> [any RemovableChannelHandler] { [Tracker(limit: self)] }

    /// How many connections are open now.
    public var openConnections: Int { registry.withLock { $0.open } }

    /// The server channel's view: counts connections, and closes an idle one when the last place is taken.
    public struct Delegate: AvailableConnectionsDelegate {
        let limit: ConnectionLimit

        public mutating func connectionOpened() { limit.opened() }
        public mutating func connectionClosed() { limit.registry.withLock { $0.open -= 1 } }
        public func isAcceptingNewConnections() -> Bool { limit.registry.withLock { $0.open < limit.maximum } }
    }

    func opened() {
        let victim = registry.withLock { registry -> (any Channel)? in
            registry.open += 1
            guard registry.open >= maximum else { return nil }
            // Never sent a head first, then kept alive between requests; oldest first in each.
            let idle = registry.entries.values.filter { !$0.inRequest }
            let pick =
                idle.filter { !$0.served }.min { $0.since < $1.since } ?? idle.min { $0.since < $1.since }
            if let pick { registry.entries[ObjectIdentifier(pick.channel)] = nil }
            return pick?.channel
        }
        if let victim {
            logger.debug("closing an idle connection to make room", metadata: ["limit": "\(maximum)"])
            victim.close(promise: nil)
        }
    }

    func update(_ channel: any Channel, _ change: (inout Entry) -> Void) {
        registry.withLock { registry in
            if var entry = registry.entries[ObjectIdentifier(channel)] {
                change(&entry)
                registry.entries[ObjectIdentifier(channel)] = entry
            }
        }
    }

    /// One connection's tracker: between the HTTP codec and Hummingbird's state handler.
    final class Tracker: ChannelDuplexHandler, RemovableChannelHandler {
        typealias InboundIn = HTTPRequestPart
        typealias InboundOut = HTTPRequestPart
        typealias OutboundIn = HTTPResponsePart
        typealias OutboundOut = HTTPResponsePart

        let limit: ConnectionLimit
        var closeAfterResponse = false

        init(limit: ConnectionLimit) { self.limit = limit }

        func handlerAdded(context: ChannelHandlerContext) {
            let channel = context.channel
            limit.registry.withLock {
                $0.entries[ObjectIdentifier(channel)] = Entry(
                    channel: channel, since: .now, inRequest: false, served: false)
            }
        }

        func handlerRemoved(context: ChannelHandlerContext) {
            let channel = context.channel
            limit.registry.withLock { _ = $0.entries.removeValue(forKey: ObjectIdentifier(channel)) }
        }

        func channelInactive(context: ChannelHandlerContext) {
            let channel = context.channel
            limit.registry.withLock { _ = $0.entries.removeValue(forKey: ObjectIdentifier(channel)) }
            context.fireChannelInactive()
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            if case .head = unwrapInboundIn(data) {
                limit.update(context.channel) {
                    $0.inRequest = true
                    $0.served = true
                }
            }
            context.fireChannelRead(data)
        }

        func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
            switch unwrapOutboundIn(data) {
            case .head(let head):
                closeAfterResponse = head.headerFields[.connection]?.lowercased() == "close"
                context.write(data, promise: promise)
            case .body:
                context.write(data, promise: promise)
            case .end:
                limit.update(context.channel) {
                    $0.inRequest = false
                    $0.since = .now
                }
                guard closeAfterResponse else { return context.write(data, promise: promise) }
                // The response said Connection: close: close once it is out, whatever the
                // request's own body still holds unread.
                let written = context.eventLoop.makePromise(of: Void.self)
                written.futureResult.cascade(to: promise)
                let loopContext = NIOLoopBound(context, eventLoop: context.eventLoop)
                written.futureResult.whenComplete { _ in loopContext.value.close(promise: nil) }
                context.writeAndFlush(data, promise: written)
            }
        }
    }
}
