import ShadowServer
import Testing

/// The client a rate limit counts, behind trusted proxies and not (Docs/server.md, "Behind a proxy").
@Suite struct ClientAddressTests {
    static let proxies = try! TrustedProxies(["10.0.0.0/8", "192.0.2.7", "2001:db8::/32"])

    @Test(
        arguments: [
            // An untrusted peer: its headers are ignored.
            ("203.0.113.9", ["for=198.51.100.1"], [], "203.0.113.9"),
            ("203.0.113.9", [], ["198.51.100.1"], "203.0.113.9"),
            // A trusted peer: the right-most address that is no trusted proxy.
            ("10.1.2.3", [], ["198.51.100.1"], "198.51.100.1"),
            ("10.1.2.3", [], ["6.6.6.6, 198.51.100.1, 10.9.9.9"], "198.51.100.1"),
            ("10.1.2.3", [], ["6.6.6.6", "198.51.100.1, 192.0.2.7"], "198.51.100.1"),
            ("10.1.2.3", ["for=198.51.100.1;proto=https, for=10.2.2.2"], ["6.6.6.6"], "198.51.100.1"),
            ("10.1.2.3", [#"for="[2001:DB8:cafe::17]:4711", for=198.51.100.2"#], [], "198.51.100.2"),
            ("10.1.2.3", [#"For="[2606:4700::1]:4711""#], [], "2606:4700::1"),
            ("10.1.2.3", [#"for="198.51.100.3:47011""#], [], "198.51.100.3"),
            // A client's entry that ends in a prepended mark (U+0600) joins the comma the proxy
            // appends into one Character: the delimiters are found by their bytes.
            ("10.1.2.3", [], ["6.6.6.6\u{600}, 198.51.100.1"], "198.51.100.1"),
            ("10.1.2.3", ["for=6.6.6.6\u{600}, for=198.51.100.1"], [], "198.51.100.1"),
            ("10.1.2.3", ["for=6.6.6.6;by=x\u{600}, for=198.51.100.1"], [], "198.51.100.1"),
            // Every hop trusted: the left-most.
            ("10.1.2.3", [], ["10.5.5.5, 10.6.6.6"], "10.5.5.5"),
            // A hop that is no address stops the walk (RFC 7239's unknown, an obfuscated name).
            ("10.1.2.3", ["for=unknown"], [], "unknown"),
            ("10.1.2.3", ["for=_hidden, for=10.4.4.4"], [], "_hidden"),
            // Nothing forwarded: the peer.
            ("10.1.2.3", [], [], "10.1.2.3"),
            ("2001:db8::5", [], ["2606:4700:0:0::0:2"], "2606:4700::2"),
        ] as [(String, [String], [String], String)])
    func resolves(peer: String, forwarded: [String], xForwardedFor: [String], client: String) {
        #expect(
            ClientAddress.resolve(peer: peer, forwarded: forwarded, xForwardedFor: xForwardedFor, trusted: Self.proxies)
                == client)
    }

    @Test func noTrustedProxyMeansThePeer() {
        #expect(
            ClientAddress.resolve(
                peer: "10.1.2.3", forwarded: ["for=1.2.3.4"], xForwardedFor: ["1.2.3.4"], trusted: .none)
                == "10.1.2.3")
    }

    @Test(arguments: [
        "10.0.0.0/33", "example.com", "10.0.0.0/", "::/129", "1.2.3.4/-1", "", "10.0.0.0/8/8", "10.0.0.0/+8",
        "10.0.0.0/ 8",
    ])
    func badEntriesAreRefused(entry: String) {
        #expect(throws: TrustedProxies.InvalidProxy.self) { try TrustedProxies([entry]) }
    }

    @Test func rangesMatchByPrefix() throws {
        let proxies = try TrustedProxies(["172.16.0.0/12", "fd00::/8", "0.0.0.0/0"])
        #expect(proxies.contains("172.31.255.255") && proxies.contains("fdff::1") && proxies.contains("8.8.8.8"))
        let narrow = try TrustedProxies(["172.16.0.0/12"])
        #expect(!narrow.contains("172.32.0.1") && !narrow.contains("fd00::1") && !narrow.contains("not-an-ip"))
    }
}
