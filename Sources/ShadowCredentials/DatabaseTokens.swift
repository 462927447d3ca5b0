#if canImport(FoundationEssentials)
package import FoundationEssentials
#else
package import Foundation
#endif
import ShadowCore

extension StateEngine {

    package func put(_ token: ServerToken) async throws {
        let id = keys.rowID(clientID: token.clientID, subject: token.subject)
        let row = StoredTokenRow(
            rowID: id, kind: token.kind.rawValue, expiresAtMilliseconds: token.expiresAtMilliseconds,
            body: try SealedRows.sealToken(SealedRows.encode(token), rowID: id, kind: token.kind, keys: keys))
        try await database.transaction(writing: true) { try await $0.putToken(row) }
    }

    package func tokens(clientID: String, subject: String, kind: ServerToken.Kind?) async throws -> [ServerToken] {
        let id = keys.rowID(clientID: clientID, subject: subject)
        let rows = try await database.read { try await $0.tokens(rowID: id, kind: kind?.rawValue) }
        return try rows.map(openToken)
    }

    package func deleteToken(clientID: String, subject: String, kind: ServerToken.Kind) async throws -> Bool {
        let id = keys.rowID(clientID: clientID, subject: subject)
        return try await database.transaction(writing: true) {
            try await $0.deleteToken(rowID: id, kind: kind.rawValue)
        }
    }

    package func expiredTokens(at time: Date, limit: Int) async throws -> [ServerToken] {
        let milliseconds = try CredentialEvent.milliseconds(time)
        let rows = try await database.transaction(writing: false) {
            try await $0.expiredTokens(at: milliseconds, limit: max(0, limit))
        }
        return try rows.map(openToken)
    }

    /// A token row's body opened and checked against its clear columns (Docs/credential-state.md,
    /// "Rows"): every path that reads tokens refuses the same rows.
    func openToken(_ row: StoredTokenRow) throws -> ServerToken {
        let token = try SealedRows.decodeToken(
            try SealedRows.openToken(row.body, rowID: row.rowID, kind: row.kind, keys: keys))
        guard keys.rowID(clientID: token.clientID, subject: token.subject) == row.rowID else {
            throw CredentialError(.corruptedState, "a token row holds another user's token")
        }
        guard token.kind.rawValue == row.kind, token.expiresAtMilliseconds == row.expiresAtMilliseconds else {
            throw CredentialError(.corruptedState, "a token row's clear columns disagree with its sealed token")
        }
        return token
    }
}
