// URLSession is the transport on Apple platforms only: on Linux it means FoundationNetworking and
// libcurl, and AsyncHTTPClientTransport takes its place.
#if canImport(Darwin)
import Dispatch
import Foundation
import ShadowCore
public import ShadowJWKS
import HTTPTypes
import Synchronization

/// The default ``HTTPTransport`` on Apple platforms: Foundation's URLSession.
///
/// It never follows redirects, enforces the request's timeout over the whole exchange, stops
/// reading once the body passes `maxResponseBytes`, sends no cookies and uses no URL cache
/// (key-set caching is ShadowKeys' own).
public final class URLSessionTransport: HTTPTransport {
    private let session: URLSession
    /// The same, with TLS 1.3 as its minimum, for requests that require it.
    private let tls13Session: URLSession
    private let delegate: Delegate
    /// Whether plain `http://` to a loopback address is allowed.
    public let allowLoopbackHTTP: Bool

    /// A transport with its own ephemeral session.
    public init(allowLoopbackHTTP: Bool = false) {
        delegate = Delegate()
        session = URLSession(configuration: Self.configuration(tls13: false), delegate: delegate, delegateQueue: nil)
        tls13Session = URLSession(
            configuration: Self.configuration(tls13: true), delegate: delegate, delegateQueue: nil)
        self.allowLoopbackHTTP = allowLoopbackHTTP
    }

    /// An ephemeral configuration without caches or cookies; with `tls13`, TLS 1.3 at least.
    private static func configuration(tls13: Bool) -> URLSessionConfiguration {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.urlCache = nil
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        configuration.httpShouldSetCookies = false
        configuration.httpCookieAcceptPolicy = .never
        if tls13 { configuration.tlsMinimumSupportedProtocolVersion = .TLSv13 }
        return configuration
    }

    deinit {
        session.invalidateAndCancel()
        tls13Session.invalidateAndCancel()
    }

    public func send(_ request: TransportRequest) async throws -> TransportResponse {
        try URLPolicy.check(request.url, allowLoopbackHTTP: allowLoopbackHTTP)
        guard let url = URL(string: request.url) else {
            throw HTTPTransportError(.forbiddenURL, "\(request.url) is not a URL")
        }
        var urlRequest = URLRequest(
            url: url, cachePolicy: .reloadIgnoringLocalCacheData, timeoutInterval: request.timeout.inSeconds)
        urlRequest.httpMethod = request.method.rawValue
        for field in request.headerFields { urlRequest.addValue(field.value, forHTTPHeaderField: field.name.rawName) }
        if let body = request.body { urlRequest.httpBody = Data(body) }

        let exchange = Exchange(limit: request.maxResponseBytes)
        let task = (request.requiresTLS13 ? tls13Session : session).dataTask(with: urlRequest)
        delegate.register(exchange, for: task)
        // The deadline runs on a Dispatch timer, not on Swift's cooperative pool, so that it fires
        // on time even when every pool thread is busy.
        let deadline = DispatchWorkItem {
            exchange.fail(
                HTTPTransportError(
                    .timeout, "no complete response from \(request.url) within \(request.timeout.inSeconds) s"))
            task.cancel()
        }
        DispatchQueue.global().asyncAfter(deadline: .now() + max(request.timeout.inSeconds, 0), execute: deadline)
        defer { deadline.cancel() }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                exchange.start(continuation)
                task.resume()
            }
        } onCancel: {
            exchange.fail(HTTPTransportError(.other, "request to \(request.url) was cancelled"))
            task.cancel()
        }
    }

    /// One request's progress: the response head, the body so far, and its continuation.
    private final class Exchange: Sendable {
        private struct State {
            var continuation: CheckedContinuation<TransportResponse, any Error>?
            var response: HTTPURLResponse?
            var body: [UInt8] = []
            var failure: HTTPTransportError?
            var finished = false
        }

        let limit: Int
        private let state = Mutex(State())

        init(limit: Int) { self.limit = limit }

        func start(_ continuation: CheckedContinuation<TransportResponse, any Error>) {
            let early = state.withLock { state -> HTTPTransportError? in
                if let failure = state.failure {
                    state.finished = true
                    return failure
                }
                state.continuation = continuation
                return nil
            }
            if let early { continuation.resume(throwing: early) }
        }

        func received(_ response: HTTPURLResponse) { state.withLock { $0.response = response } }

        /// Appends body bytes; false when the cap is passed (the caller cancels the task).
        func received(_ data: Data) -> Bool {
            state.withLock { state in
                guard state.failure == nil else { return false }
                if state.body.count + data.count > limit {
                    state.failure = HTTPTransportError(.bodyTooLarge, "response body exceeds \(limit) bytes")
                    return false
                }
                state.body.append(contentsOf: data)
                return true
            }
        }

        func fail(_ error: HTTPTransportError) {
            state.withLock { state in
                if state.failure == nil && !state.finished { state.failure = error }
            }
        }

        func complete(_ error: (any Error)?) {
            let (continuation, result) = state.withLock {
                state -> (
                    CheckedContinuation<TransportResponse, any Error>?, Result<TransportResponse, HTTPTransportError>
                ) in
                defer {
                    state.continuation = nil
                    state.finished = true
                }
                if let failure = state.failure { return (state.continuation, .failure(failure)) }
                if let error {
                    let nsError = error as NSError
                    let kind: HTTPTransportError.Kind = nsError.code == NSURLErrorTimedOut ? .timeout : .connection
                    return (state.continuation, .failure(HTTPTransportError(kind, error.localizedDescription)))
                }
                guard let response = state.response else {
                    return (state.continuation, .failure(HTTPTransportError(.connection, "no HTTP response")))
                }
                let fields = response.allHeaderFields.compactMap { name, value -> (name: String, value: String)? in
                    guard let name = name as? String, let value = value as? String else { return nil }
                    return (name, value)
                }
                do throws(HTTPTransportError) {
                    let answer = try TransportResponse(code: response.statusCode, fields: fields, body: state.body)
                    return (state.continuation, .success(answer))
                } catch {
                    return (state.continuation, .failure(error))
                }
            }
            continuation?.resume(with: result.mapError { $0 as any Error })
        }
    }

    /// Routes session callbacks to exchanges. Its only state is behind a mutex.
    private final class Delegate: NSObject, URLSessionDataDelegate, @unchecked Sendable {
        private let exchanges = Mutex([Int: Exchange]())

        func register(_ exchange: Exchange, for task: URLSessionTask) {
            exchanges.withLock { $0[task.taskIdentifier] = exchange }
        }

        private func exchange(_ task: URLSessionTask) -> Exchange? {
            exchanges.withLock { $0[task.taskIdentifier] }
        }

        func urlSession(
            _ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
            completionHandler: @escaping (URLSession.ResponseDisposition) -> Void
        ) {
            if let http = response as? HTTPURLResponse { exchange(dataTask)?.received(http) }
            completionHandler(.allow)
        }

        func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
            if exchange(dataTask)?.received(data) == false { dataTask.cancel() }
        }

        func urlSession(
            _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
            newRequest request: URLRequest, completionHandler: @escaping (URLRequest?) -> Void
        ) {
            completionHandler(nil)  // never follow redirects; the 3xx is the answer
        }

        func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
            let exchange = exchanges.withLock { $0.removeValue(forKey: task.taskIdentifier) }
            exchange?.complete(error)
        }
    }
}
#endif
