#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import NIOSSL
import PostgresNIO
import ShadowCore
import ShadowCredentials

/// A PostgreSQL server and database, from a `postgres://` or `postgresql://` URL read as libpq
/// reads it. Never prints its password.
///
/// `postgres://[user[:password]@][host][:port][/database][?param=value&…]`, percent-decoded.
/// Parameters: `sslmode` (`disable`, `allow`, `prefer`, `require`, `verify-ca`, `verify-full`),
/// `sslrootcert` (a PEM file), `host` (a name, or an absolute path: the folder of a Unix socket),
/// `port`, `user`, `password`, `dbname`, `connect_timeout` and `application_name` (accepted and
/// ignored). Unset parts come from `PGHOST`, `PGPORT`, `PGUSER`, `PGPASSWORD`, `PGDATABASE`,
/// `PGSSLMODE` and `PGSSLROOTCERT`, then libpq's defaults: the Unix socket folder
/// `/var/run/postgresql`, port 5432, the user `USER` names, a database named as the user, and
/// `sslmode=prefer`.
public struct PostgresLocation: Sendable, CustomStringConvertible {
    public enum SSLMode: String, Sendable, CaseIterable {
        case disable, allow, prefer, require
        case verifyCA = "verify-ca"
        case verifyFull = "verify-full"
    }

    public var host: String
    public var port: Int
    public var user: String
    public var password: String?
    public var database: String
    public var sslMode: SSLMode
    public var sslRootCertificate: String?

    /// A host that is an absolute path names the folder of the server's Unix socket.
    public var socketPath: String? { host.hasPrefix("/") ? "\(host)/.s.PGSQL.\(port)" : nil }

    public var description: String {
        let where_ =
            host.hasPrefix("/") ? "socket \(host)" : (host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)")
        return "postgres://\(user)@\(where_)/\(database)"
    }

    public init(url: String, environment: [String: String]? = nil) throws {
        let environment = environment ?? ProcessInfo.processInfo.environment
        func invalid(_ reason: String) -> CredentialError {
            CredentialError(.invalidParameter, "the PostgreSQL URL: \(reason)")
        }
        var rest: Substring
        if url.hasPrefix("postgres://") {
            rest = url.dropFirst("postgres://".count)
        } else if url.hasPrefix("postgresql://") {
            rest = url.dropFirst("postgresql://".count)
        } else {
            throw invalid("it must start with postgres:// or postgresql://")
        }

        var query: Substring = ""
        if let mark = rest.firstIndex(of: "?") {
            query = rest[rest.index(after: mark)...]
            rest = rest[..<mark]
        }
        var path: Substring = ""
        if let slash = rest.firstIndex(of: "/") {
            path = rest[rest.index(after: slash)...]
            rest = rest[..<slash]
        }
        var user: String?, password: String?, host: String?, port: String?, database: String?
        if let at = rest.lastIndex(of: "@") {
            let userInfo = rest[..<at]
            rest = rest[rest.index(after: at)...]
            if let colon = userInfo.firstIndex(of: ":") {
                user = try Self.decode(userInfo[..<colon], invalid)
                password = try Self.decode(userInfo[userInfo.index(after: colon)...], invalid)
            } else {
                user = try Self.decode(userInfo, invalid)
            }
        }
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else { throw invalid("an IPv6 address lacks its ']'") }
            host = String(rest[rest.index(after: rest.startIndex)..<close])
            let after = rest[rest.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw invalid("unexpected text after the IPv6 address") }
                port = String(after.dropFirst())
            }
        } else if let colon = rest.lastIndex(of: ":") {
            host = try Self.decode(rest[..<colon], invalid)
            port = String(rest[rest.index(after: colon)...])
        } else if !rest.isEmpty {
            host = try Self.decode(rest, invalid)
        }
        if !path.isEmpty { database = try Self.decode(path, invalid) }
        var sslMode: String?, rootCertificate: String?
        for pair in query.split(separator: "&", omittingEmptySubsequences: true) {
            guard let equals = pair.firstIndex(of: "=") else { throw invalid("the parameter '\(pair)' has no value") }
            let name = String(pair[..<equals]), value = try Self.decode(pair[pair.index(after: equals)...], invalid)
            switch name {
            case "sslmode": sslMode = value
            case "sslrootcert": rootCertificate = value
            case "host": host = value
            case "port": port = value
            case "user": user = value
            case "password": password = value
            case "dbname": database = value
            case "connect_timeout", "application_name": break
            default:
                throw invalid(
                    """
                    unknown parameter '\(name)' (known: sslmode, sslrootcert, host, port, user, password, dbname, \
                    connect_timeout, application_name)
                    """
                )
            }
        }
        func nonEmpty(_ value: String?) -> String? { value.flatMap { $0.isEmpty ? nil : $0 } }
        self.host = nonEmpty(host) ?? nonEmpty(environment["PGHOST"]) ?? "/var/run/postgresql"
        let portText = nonEmpty(port) ?? nonEmpty(environment["PGPORT"]) ?? "5432"
        guard let portNumber = Int(portText), (1...65535).contains(portNumber) else {
            throw invalid("the port \(portText.debugDescription) is not 1 to 65535")
        }
        self.port = portNumber
        guard let userName = nonEmpty(user) ?? nonEmpty(environment["PGUSER"]) ?? nonEmpty(environment["USER"]) else {
            throw invalid("no user name: give one in the URL, or set PGUSER")
        }
        self.user = userName
        self.password = password ?? nonEmpty(environment["PGPASSWORD"])
        self.database = nonEmpty(database) ?? nonEmpty(environment["PGDATABASE"]) ?? userName
        let modeText = sslMode ?? nonEmpty(environment["PGSSLMODE"]) ?? "prefer"
        guard let mode = SSLMode(rawValue: modeText) else {
            throw invalid(
                """
                sslmode \(modeText.debugDescription) is not one of \
                \(SSLMode.allCases.map(\.rawValue).joined(separator: ", "))
                """
            )
        }
        self.sslMode = mode
        sslRootCertificate = rootCertificate ?? nonEmpty(environment["PGSSLROOTCERT"])
        if mode == .verifyCA || mode == .verifyFull, self.host.hasPrefix("/") {
            throw invalid("sslmode \(mode.rawValue) needs a TCP host, not a Unix socket")
        }
    }

    static func decode(_ text: Substring, _ invalid: (String) -> CredentialError) throws -> String {
        var bytes: [UInt8] = []
        var iterator = text.utf8.makeIterator()
        while let byte = iterator.next() {
            guard byte == UInt8(ascii: "%") else {
                bytes.append(byte)
                continue
            }
            guard let high = iterator.next().flatMap(Hex.value), let low = iterator.next().flatMap(Hex.value)
            else { throw invalid("a malformed %-escape") }
            bytes.append(high << 4 | low)
        }
        guard let decoded = String(validating: bytes, as: UTF8.self) else {
            throw invalid("a %-escape that is not UTF-8")
        }
        return decoded
    }

    /// libpq's modes: `disable` no TLS; `allow` and `prefer` TLS when offered, unverified;
    /// `require` TLS, unverified (verified against `sslrootcert` when one is given, as libpq does);
    /// `verify-ca` the chain; `verify-full` the chain and the host name.
    func tls() throws -> PostgresClient.Configuration.TLS {
        var configuration = TLSConfiguration.makeClientConfiguration()
        if let sslRootCertificate {
            do { configuration.trustRoots = .certificates(try NIOSSLCertificate.fromPEMFile(sslRootCertificate)) } catch
            {
                throw CredentialError(.invalidParameter, "sslrootcert \(sslRootCertificate): not a readable PEM file")
            }
        }
        switch sslMode {
        case .disable: return .disable
        case .allow, .prefer:
            configuration.certificateVerification = .none
            return .prefer(configuration)
        case .require:
            configuration.certificateVerification = sslRootCertificate == nil ? .none : .noHostnameVerification
            return .require(configuration)
        case .verifyCA:
            configuration.certificateVerification = .noHostnameVerification
            return .require(configuration)
        case .verifyFull:
            configuration.certificateVerification = .fullVerification
            return .require(configuration)
        }
    }
}
