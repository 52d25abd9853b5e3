import Foundation
import KeyfobCodecs
import Nostr

/// The nostr vectors in `Tests/Vectors/nostr/` (public sources; see its README).
enum NostrVectors {
    static let root = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Vectors/nostr")

    static func json(_ name: String) throws -> [String: Any] {
        try JSONSerialization.jsonObject(with: Data(contentsOf: root.appendingPathComponent(name))) as! [String: Any]
    }

    static func text(_ name: String) throws -> String {
        try String(contentsOf: root.appendingPathComponent(name), encoding: .utf8)
    }

    static func jsonBytes(_ object: Any) throws -> [UInt8] {
        [UInt8](try JSONSerialization.data(withJSONObject: object))
    }
}

func hex(_ s: String) -> [UInt8] { Hex.decode(s)! }
