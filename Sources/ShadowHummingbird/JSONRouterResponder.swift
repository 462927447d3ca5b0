public import Hummingbird
import HTTPTypes

/// A router's responder that answers the requests none of its routes takes in the JSON error
/// shape of every other answer (Docs/server.md, "Routes"), where Hummingbird answers an empty 404:
/// - 405 `method_not_allowed`, with `Allow` naming the path's methods, when routes take the path
///   with other methods (RFC 9110, 15.5.6);
/// - 404 `not_found` when no route takes the path.
///
/// Build the router with `.autoGenerateHeadEndpoints`, so that `HEAD` is answered wherever `GET`
/// is (RFC 9110, 9.1) and `Allow` lists it. Add every route before this is made: the routes are
/// read once, here.
public struct JSONRouterResponder<Context: RequestContext>: HTTPResponder {
    let routes: RouterResponder<Context>
    /// One `GET` route per path the router has, answering with that path's methods in `Allow`: a
    /// request none of `routes` takes is looked up here as a `GET` of its path.
    let methods: RouterResponder<Context>

    public init(_ router: Router<Context>) {
        routes = router.buildResponder()
        // Read after buildResponder, which adds the HEAD routes.
        let byPath = Dictionary(grouping: router.routes, by: { $0.path.description })
        let probe = Router(context: Context.self)
        for paths in byPath.values {
            let allowed = Set(paths.map(\.method.rawValue)).sorted().joined(separator: ", ")
            probe.get(paths[0].path) { _, _ in Response(status: .methodNotAllowed, headers: [.allow: allowed]) }
        }
        methods = probe.buildResponder()
    }

    public func respond(to request: Request, context: Context) async throws -> Response {
        let response = try await routes.respond(to: request, context: context)
        // Hummingbird's name for a request no route took; a route's own 404 keeps its answer.
        guard context.endpointPath == Self.unrouted else { return response }
        var head = request.head
        head.method = .get
        let other = try await methods.respond(to: Request(head: head, body: request.body), context: context)
        let answer: Response
        if context.endpointPath != Self.unrouted, let allowed = other.headers[.allow] {
            answer = jsonError(
                .methodNotAllowed, "method_not_allowed", "this path takes \(allowed), not \(request.method)",
                headers: [.allow: allowed])
        } else {
            answer = jsonError(.notFound, "not_found", "no route takes this path")
        }
        // An answer to HEAD has no body (RFC 9110, 9.3.2): a client reads none.
        return request.method == .head ? answer.createHeadResponse() : answer
    }

    static var unrouted: String { "NotFound" }
}
