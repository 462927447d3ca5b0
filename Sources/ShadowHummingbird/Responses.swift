import Hummingbird
import HTTPTypes
import NIOCore
import ShadowCore

/// A JSON error response: `{"error":{"code":…,"message":…}}`, with a `WWW-Authenticate`
/// challenge when one is given.
func jsonError(
    _ status: HTTPResponse.Status, _ code: String, _ message: String, challenge: String? = nil,
    headers extra: HTTPFields = [:]
) -> Response {
    var headers: HTTPFields = [.contentType: "application/json"] + extra
    if let challenge { headers[.wwwAuthenticate] = challenge }
    let body = JSONValue.object(["error": .error(code: code, message: message)]).serialized()
    return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(string: body)))
}

/// The body of ``withDeadline(_:_:)`` did not finish in time.
struct DeadlineExceeded: Error {}

/// `body`'s result, or ``DeadlineExceeded`` once `timeout` has passed (the body is cancelled).
func withDeadline<R: Sendable>(_ timeout: Duration, _ body: @escaping @Sendable () async throws -> R) async throws -> R
{
    try await withThrowingTaskGroup(of: R.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(for: timeout)
            throw DeadlineExceeded()
        }
        defer { group.cancelAll() }
        guard let first = try await group.next() else { throw CancellationError() }
        return first
    }
}
