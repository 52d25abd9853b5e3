import Foundation

/// What to call a passkey: the provider its AAGUID names (`Public/passkey-providers.json`),
/// else "Passkey"; and the browser and system it was created on, from the User-Agent.
struct PasskeyNames: Sendable {
    struct Provider: Sendable, Equatable { let name: String; let icon: String }
    let providers: [String: Provider]

    static let unknown = Provider(name: "Passkey", icon: "passkey")

    /// Reads the catalog from the public directory; a missing or broken file means "Passkey" everywhere.
    init(publicDirectory: String) {
        let path = (publicDirectory as NSString).appendingPathComponent("passkey-providers.json")
        var providers: [String: Provider] = [:]
        if let data = FileManager.default.contents(atPath: path),
            let object = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any],
            let list = object["providers"] as? [String: [String: String]]
        {
            for (aaguid, entry) in list {
                if let name = entry["name"] { providers[aaguid.lowercased()] = Provider(name: name, icon: entry["icon"] ?? "passkey") }
            }
        }
        self.providers = providers
    }

    func provider(aaguid: [UInt8]) -> Provider {
        guard aaguid.count == 16, aaguid.contains(where: { $0 != 0 }) else { return Self.unknown }
        let hex = aaguid.map { String(format: "%02x", $0) }.joined()
        let dashed = [hex.prefix(8), hex.dropFirst(8).prefix(4), hex.dropFirst(12).prefix(4), hex.dropFirst(16).prefix(4), hex.dropFirst(20)]
            .map(String.init).joined(separator: "-")
        return providers[dashed] ?? Self.unknown
    }

    /// "Chrome on Android", "Safari on iPhone", … from a User-Agent header; nil when it says nothing useful.
    /// A name a person gave a passkey, trimmed; nil for none. At most 64 characters, no control characters.
    static func validated(_ raw: String?) throws -> String? {
        guard let name = raw?.trimmingCharacters(in: .whitespacesAndNewlines), !name.isEmpty else { return nil }
        guard name.count <= 64, !name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
            throw KeyfobError.invalid("a passkey name is at most 64 characters, without control characters")
        }
        return name
    }

    static func createdOn(userAgent: String?) -> String? {
        guard let ua = userAgent, !ua.isEmpty else { return nil }
        let browser: String? =
            ua.contains("Edg/")
            ? "Edge"
            : ua.contains("OPR/")
                ? "Opera"
                : ua.contains("Firefox/")
                    ? "Firefox"
                    : ua.contains("Chrome/") || ua.contains("CriOS/") ? "Chrome" : ua.contains("Safari/") ? "Safari" : nil
        let system: String? =
            ua.contains("iPhone")
            ? "iPhone"
            : ua.contains("iPad")
                ? "iPad"
                : ua.contains("Android")
                    ? "Android"
                    : ua.contains("Windows")
                        ? "Windows"
                        : ua.contains("Mac OS X") || ua.contains("Macintosh")
                            ? "Mac"
                            : ua.contains("CrOS") ? "ChromeOS" : ua.contains("Linux") ? "Linux" : nil
        switch (browser, system) {
        case let (b?, s?): return "\(b) on \(s)"
        case let (b?, nil): return b
        case let (nil, s?): return s
        default: return nil
        }
    }
}
