import ShadowCore

/// The JSON exchanged with the `shadow-keys-fetch` helper: a request on its stdin, a response
/// (or a transport error) on its stdout. Bodies travel as base64url.
package enum HTTPWire {
    package static func encode(_ request: HTTPRequest, allowLoopbackHTTP: Bool) -> String {
        JSONValue.object([
            "method": .string(request.method), "url": .string(request.url),
            "headers": .array(request.headers.map { [.string($0.name), .string($0.value)] }),
            "body": request.body.map { .string(Base64URL.encode($0)) } ?? .null,
            "timeout": .number(JSONNumber(request.timeout) ?? JSONNumber(5)),
            "maxResponseBytes": .int(request.maxResponseBytes), "allowLoopbackHTTP": .bool(allowLoopbackHTTP),
        ]).serialized()
    }

    package static func decodeRequest(_ bytes: [UInt8]) throws -> (HTTPRequest, allowLoopbackHTTP: Bool) {
        guard let object = try StrictJSON.parse(bytes).objectValue, let method = object["method"]?.stringValue, let url = object["url"]?.stringValue,
            let timeout = object["timeout"]?.numberValue?.doubleValue, let cap = object["maxResponseBytes"]?.numberValue?.int64Value
        else { throw HTTPTransportError(.other, "malformed helper request") }
        var request = HTTPRequest(method: method, url: url, timeout: timeout, maxResponseBytes: Int(cap))
        request.headers = try headers(object["headers"])
        if let body = object["body"]?.stringValue { request.body = try Base64URL.decode(body) }
        return (request, object["allowLoopbackHTTP"]?.boolValue ?? false)
    }

    package static func encode(_ result: Result<HTTPResponse, HTTPTransportError>) -> String {
        switch result {
        case .success(let response):
            return JSONValue.object([
                "status": .int(response.status), "headers": .array(response.headers.map { [.string($0.name), .string($0.value)] }),
                "body": .string(Base64URL.encode(response.body)),
            ]).serialized()
        case .failure(let error):
            return JSONValue.object(["error": ["kind": .string(error.kind.rawValue), "message": .string(error.message)]]).serialized()
        }
    }

    package static func decodeResponse(_ bytes: [UInt8]) throws -> HTTPResponse {
        guard let object = try? StrictJSON.parse(bytes).objectValue else { throw HTTPTransportError(.other, "the fetch helper gave no valid answer") }
        if let error = object["error"]?.objectValue {
            let kind = error["kind"]?.stringValue.flatMap(HTTPTransportError.Kind.init(rawValue:)) ?? .other
            throw HTTPTransportError(kind, error["message"]?.stringValue ?? "fetch failed")
        }
        guard let status = object["status"]?.numberValue?.int64Value, let body = object["body"]?.stringValue else {
            throw HTTPTransportError(.other, "the fetch helper gave an incomplete answer")
        }
        return HTTPResponse(status: Int(status), headers: try headers(object["headers"]), body: try Base64URL.decode(body))
    }

    private static func headers(_ value: JSONValue?) throws -> HTTPHeaders {
        var headers = HTTPHeaders()
        for pair in value?.arrayValue ?? [] {
            guard let fields = pair.arrayValue, fields.count == 2, let name = fields[0].stringValue, let value = fields[1].stringValue else {
                throw HTTPTransportError(.other, "malformed header in helper exchange")
            }
            headers.add(name, value)
        }
        return headers
    }
}
