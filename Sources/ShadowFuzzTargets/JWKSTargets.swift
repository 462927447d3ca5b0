import Foundation
import ShadowCore
import ShadowJWKS

enum JWKSTargets {
    static let now = Date(timeIntervalSince1970: 1_700_000_000)

    /// Header lines `Name: value`, read into fields as a transport reads a response's: freshness
    /// and Retry-After never trap and stay in bounds; every HTTP-date that parses formats and
    /// parses back to itself.
    static let httpCaching: FuzzTargets.Harness = { data in
        var lines: [(name: String, value: String)] = []
        for line in String(decoding: data, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false) {
            guard let colon = line.firstIndex(of: ":") else { continue }
            lines.append((String(line[..<colon]), String(line[line.index(after: colon)...])))
            let value = String(line[line.index(after: colon)...]).trimmingPrefix(" ")
            if let date = HTTPCaching.parseHTTPDate(String(value)) {
                precondition(
                    HTTPCaching.parseHTTPDate(HTTPCaching.formatHTTPDate(date)) == date,
                    "HTTP-date round trip failed: \(value.prefix(80))")
            }
            _ = HTTPCaching.directives(String(value))
        }
        let headers = must("a 200 answer with these fields") {
            try TransportResponse(code: 200, fields: lines, body: []).headerFields
        }
        if let lifetime = HTTPCaching.freshnessLifetime(headers, now: now) {
            precondition(lifetime >= 0 && lifetime.isFinite)
        }
        if let retry = HTTPCaching.retryAfter(headers, now: now) { precondition(retry >= 0 && retry.isFinite) }
    }

    static let url = "https://appleid.apple.com/auth/keys"

    /// The cache file: what is accepted is exactly the file its snapshot encodes to, and reads
    /// back the same.
    static let cacheFile: FuzzTargets.Harness = { data in
        guard let snapshot = try? FileKeySetStore.decode(Array(data), url: url) else { return }
        let text = FileKeySetStore.encode(snapshot, url: url)
        precondition(text.utf8.elementsEqual(data), "a cache file read is not the file its snapshot writes")
        guard let again = try? FileKeySetStore.decode(Array(text.utf8), url: url) else {
            preconditionFailure("a cache file's re-encoding does not read back")
        }
        precondition(again == snapshot, "a cache file changed in a round trip")
    }
}
