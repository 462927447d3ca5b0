public import Hummingbird
import HTTPTypes
import NIOCore
import ShadowApple
import ShadowCore
public import ShadowServer

extension RouterMethods {
    /// `POST path`: Apple's server-to-server notifications, through `receiver` (the body is read
    /// up to 64 KiB; a larger one is 413). What a notification ends besides its state (a user's
    /// sessions) is the receiver's `afterApplying`.
    @discardableResult
    public func addAppleNotifications(
        _ path: RouterPath = "/apple/notifications", receiver: AppleNotificationReceiver,
        bodyTimeout: Duration = .seconds(10)
    ) -> Self {
        post(path) { request, _ -> Response in
            let limit = AppleNotificationVerifier.maxBodyBytes
            // A declared length over the cap is refused from the header alone, before any body
            // (or a 100-continue) is sent.
            if let declared = request.headers[.contentLength], let length = Int(declared), length > limit {
                return Self.notificationResponse(receiver.refuseOversized(), close: true)
            }
            let response: NotificationResponse
            do {
                let stream = request.body
                let body = try await withDeadline(bodyTimeout) { try await stream.collect(upTo: limit) }
                response = await receiver.receive(body.readableBytesView)
            } catch is NIOTooManyBytesError {
                return Self.notificationResponse(receiver.refuseOversized(), close: true)
            } catch is DeadlineExceeded {
                return Self.notificationResponse(receiver.refuseIncomplete(timedOut: true), close: true)
            } catch {
                // The client went away mid-body (or sent a broken one): nothing was too large.
                return Self.notificationResponse(receiver.refuseIncomplete(timedOut: false), close: true)
            }
            return Self.notificationResponse(response, close: false)
        }
    }

    /// The answer's status and JSON body; `close` ends the connection after it (a body that was
    /// refused unread, or left unfinished, must not be read as the next request).
    static func notificationResponse(_ response: NotificationResponse, close: Bool) -> Response {
        var headers: HTTPFields = [.contentType: "application/json"]
        if close { headers[.connection] = "close" }
        return Response(
            status: response.status, headers: headers,
            body: .init(byteBuffer: ByteBuffer(bytes: response.body)))
    }
}
