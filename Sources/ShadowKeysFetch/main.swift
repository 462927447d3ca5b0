// shadow-keys-fetch: performs one HTTP request for the `shadow-keys` CLI through URLSession.
//
// The CLI itself does not link FoundationNetworking (it would add ~9 ms to every start); it runs
// this helper only when it must reach the network. The request arrives as JSON on stdin and the
// response (or a transport error) leaves as JSON on stdout; see HTTPWire in ShadowJWKS.
#if canImport(Darwin)
import Darwin
#else
import Glibc
#endif
import ShadowCore
import ShadowJWKS

func answer(_ text: String) {
    var text = text + "\n"
    text.withUTF8 { buffer in
        var offset = 0
        while offset < buffer.count {
            let written = write(1, buffer.baseAddress! + offset, buffer.count - offset)
            if written <= 0 { break }
            offset += written
        }
    }
}

guard let input = try? Files.readAll(0, limit: 4 << 20), let (request, allowLoopbackHTTP) = try? HTTPWire.decodeRequest(input) else {
    answer(HTTPWire.encode(.failure(HTTPTransportError(.other, "shadow-keys-fetch: malformed request on stdin"))))
    exit(64)
}
let transport = URLSessionTransport(allowLoopbackHTTP: allowLoopbackHTTP)
do {
    answer(HTTPWire.encode(.success(try await transport.send(request))))
} catch let error as HTTPTransportError {
    answer(HTTPWire.encode(.failure(error)))
} catch {
    answer(HTTPWire.encode(.failure(HTTPTransportError(.other, "\(error)"))))
}
