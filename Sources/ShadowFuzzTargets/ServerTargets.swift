import ShadowApple
import ShadowCore
import ShadowServer

enum ServerTargets {
    static let proxies = must("the fixed trusted proxies") { try TrustedProxies(["10.0.0.0/8", "2001:db8::/32"]) }

    /// Forwarding headers from a trusted proxy, and form bodies. Input lines: a `Forwarded`
    /// value, an `X-Forwarded-For` value, a form. The client is the same whether the
    /// `X-Forwarded-For` entries come in one field or split into two at any comma (a delimiter
    /// is one wherever it stands), headers from an untrusted peer are ignored, and a form's
    /// fields encode and read back to the same bytes.
    static let forwarded: FuzzTargets.Harness = { data in
        let text = String(decoding: data.bindMemory(to: UInt8.self), as: UTF8.self)
        let lines = text.split(byte: UInt8(ascii: "\n"), maxSplits: 2, omittingEmptySubsequences: false).map(
            String.init)
        let forwarded = [lines[0]]
        let chain = lines.count > 1 ? lines[1] : ""
        let whole = ClientAddress.resolve(peer: "10.1.1.1", forwarded: [], xForwardedFor: [chain], trusted: proxies)
        let commas = chain.split(byte: UInt8(ascii: ","), maxSplits: 1, omittingEmptySubsequences: false)
        if commas.count == 2 {
            let split = ClientAddress.resolve(
                peer: "10.1.1.1", forwarded: [], xForwardedFor: commas.map(String.init), trusted: proxies)
            precondition(split.utf8.elementsEqual(whole.utf8), "a comma splits X-Forwarded-For only in one field")
        }
        _ = ClientAddress.resolve(peer: "10.1.1.1", forwarded: forwarded, xForwardedFor: [chain], trusted: proxies)
        let outside = ClientAddress.resolve(
            peer: "192.0.2.1", forwarded: forwarded, xForwardedFor: [chain], trusted: proxies)
        precondition(outside == "192.0.2.1", "an untrusted peer's forwarding headers were believed")

        let form = lines.count > 2 ? lines[2] : ""
        let fields = FormDecoding.pairs(in: form)
        let again = FormDecoding.pairs(in: String(decoding: FormEncoding.encode(fields), as: UTF8.self))
        precondition(
            again.count == fields.count
                && zip(fields, again).allSatisfy {
                    $0.name.utf8.elementsEqual($1.name.utf8) && $0.value.utf8.elementsEqual($1.value.utf8)
                },
            "a form's fields do not read back as they were encoded")
    }
}
