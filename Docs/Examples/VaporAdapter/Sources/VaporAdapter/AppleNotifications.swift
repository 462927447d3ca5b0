import ShadowKeys
import Vapor

// docs: vapor-adapter
extension RoutesBuilder {
    /// POST `path`: Apple's server-to-server notifications, answered by ShadowKeys' receiver.
    func appleNotifications(_ path: PathComponent..., receiver: AppleNotificationReceiver) {
        on(.POST, path, body: .collect(maxSize: "64kb")) { request async -> Response in
            let body = request.body.data.map { Array($0.readableBytesView) } ?? []
            let answer = await receiver.receive(body)
            return Response(
                status: .init(statusCode: answer.status.code), headers: ["Content-Type": "application/json"],
                body: .init(data: Data(answer.body)))
        }
    }
}
// end of docs
