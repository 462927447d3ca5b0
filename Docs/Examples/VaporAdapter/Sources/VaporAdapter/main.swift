import ShadowKeys
import Vapor

// A Vapor app with the notification route, over a SQLite-free in-memory store (an example only;
// a server uses SQLiteCredentialStore or PostgresCredentialStore).
let app = try await Application.make(.detect())
let appleKeys = try JWKSProvider(configuration: .init(url: Apple.keysURL), transport: try DefaultHTTPTransport())
let receiver = AppleNotificationReceiver(
    clientIDs: ["com.example.app"], keys: appleKeys, store: InMemoryCredentialStore())
app.appleNotifications("apple", "notifications", receiver: receiver)
try await app.execute()
try await app.asyncShutdown()
