import Hummingbird
import HTTPTypes
import HummingbirdTesting
import NIOCore
import ShadowHummingbird
import Testing

/// What no route takes, answered in the JSON error shape: 405 with `Allow` for a path routed with
/// other methods, 404 for a path not routed at all; a route's own answers untouched.
@Suite struct JSONRouterResponderTests {
    static func application() -> some ApplicationProtocol {
        let router = Router(options: .autoGenerateHeadEndpoints)
        router.get("healthz") { _, _ in "ok" }
        router.post("auth/refresh") { _, _ in "refreshed" }
        router.delete("auth/sessions/:id") { _, context -> Response in
            // A route's own 404, with a body of its own.
            context.parameters.get("id") == "known"
                ? Response(status: .ok)
                : Response(status: .notFound, body: .init(byteBuffer: ByteBuffer(string: "route's own")))
        }
        return Application(responder: JSONRouterResponder(router))
    }

    @Test func aPathRoutedWithOtherMethodsIs405WithAllow() async throws {
        try await Self.application().test(.router) { client in
            for (uri, method, allowed) in [
                ("/healthz", HTTPRequest.Method.post, "GET, HEAD"), ("/auth/refresh", .get, "POST"),
                ("/auth/refresh", .head, "POST"), ("/auth/sessions/abc", .put, "DELETE"),
            ] {
                try await client.execute(uri: uri, method: method) { response in
                    #expect(response.status == .methodNotAllowed, "\(method) \(uri)")
                    #expect(response.headers[.allow] == allowed, "\(method) \(uri)")
                    #expect(response.headers[.contentType] == "application/json")
                    let message = "this path takes \(allowed), not \(method)"
                    let body = #"{"error":{"code":"method_not_allowed","message":"\#(message)"}}"#
                    #expect(String(buffer: response.body) == (method == .head ? "" : body), "\(method) \(uri)")
                }
            }
        }
    }

    @Test func aPathNoRouteTakesIs404InJSON() async throws {
        try await Self.application().test(.router) { client in
            for (uri, method) in [
                ("/", HTTPRequest.Method.get), ("/healthz/x", .get), ("/auth", .post), ("/auth/sessions", .delete),
                ("/auth/sessions/a/b", .delete), ("/nope", .head),
            ] {
                try await client.execute(uri: uri, method: method) { response in
                    #expect(response.status == .notFound, "\(method) \(uri)")
                    let body = #"{"error":{"code":"not_found","message":"no route takes this path"}}"#
                    #expect(String(buffer: response.body) == (method == .head ? "" : body), "\(method) \(uri)")
                }
            }
        }
    }

    @Test func routesKeepTheirOwnAnswersAndHeadFollowsGet() async throws {
        try await Self.application().test(.router) { client in
            try await client.execute(uri: "/healthz", method: .head) { response in
                #expect(response.status == .ok)
                #expect(response.body.readableBytes == 0)
            }
            for uri in ["/healthz", "/healthz/"] {
                try await client.execute(uri: uri, method: .get) { response in
                    #expect(String(buffer: response.body) == "ok", "\(uri)")
                }
            }
            try await client.execute(uri: "/auth/sessions/other", method: .delete) { response in
                #expect(response.status == .notFound)
                #expect(String(buffer: response.body) == "route's own")
            }
            try await client.execute(uri: "/auth/sessions/known", method: .delete) { response in
                #expect(response.status == .ok)
            }
        }
    }
}
