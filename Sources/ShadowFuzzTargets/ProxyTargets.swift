import Foundation
import ShadowCore
import ShadowCredentials
import ShadowCrypto
import ShadowVault
import ShadowPostgres
import ShadowHTTP
import ShadowStorage

enum ProxyTargets {
    /// The proxy variables as curl reads them: input lines are HTTPS_PROXY, NO_PROXY and a host.
    /// Whatever parses describes itself without its password (another password, the same
    /// description), and every host is either bypassed or sent to the configured proxy.
    static let proxy: FuzzTargets.Harness = { data in
        guard let text = String(validating: data, as: UTF8.self) else { return }
        let lines = text.split(separator: "\n", maxSplits: 2, omittingEmptySubsequences: false).map(String.init)
        let settings = ProxySettings.fromEnvironment([
            "HTTPS_PROXY": lines[0], "NO_PROXY": lines.count > 1 ? lines[1] : "",
        ])
        if case .success(let server)? = settings.https {
            var other = server
            other.password = server.password == nil ? "x" : nil
            precondition(
                other.description == server.description && server.debugDescription == server.description,
                "a proxy's description depends on its password")
        }
        let host = lines.count > 2 ? lines[2] : "example.com"
        let chosen = try? settings.server(forHost: host)
        if settings.bypasses(host) { precondition(chosen == nil, "a bypassed host still goes through the proxy") }
    }
}
