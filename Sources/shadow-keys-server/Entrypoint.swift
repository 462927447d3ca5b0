import ShadowKeysServerCommands

/// `shadow-keys-server`: `serve`, and every command with PostgreSQL stores (Docs/cli.md).
@main
struct Entrypoint {
    static func main() async {
        await ShadowKeysServerCommand.main()
    }
}
