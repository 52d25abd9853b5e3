/// Human names for common kinds, for the approval page.
enum KindNames {
    static let names: [Int: String] = [
        0: "profile", 1: "note", 3: "contact list", 4: "encrypted direct message", 5: "deletion request", 6: "repost",
        7: "reaction", 16: "generic repost", 1111: "comment", 9734: "zap request", 9735: "zap receipt",
        10002: "relay list", 22242: "relay login", 24133: "remote signer message", 27235: "HTTP login",
        30023: "long-form article", 30078: "app data",
    ]
    static func name(_ kind: Int) -> String { names[kind] ?? "kind \(kind)" }
}
