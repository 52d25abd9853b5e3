import Foundation
import KeyfobCodecs
import Nostr

/// Tests/Vectors/polkadot: public vectors, each file's source in its README.
enum PolkadotVectors {
    static let root = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Vectors/polkadot")

    static func json(_ name: String) throws -> [String: Any] {
        try JSONSerialization.jsonObject(with: Data(contentsOf: root.appendingPathComponent(name))) as! [String: Any]
    }
}

func hex(_ s: String) -> [UInt8] { Hex.decode(s.hasPrefix("0x") ? String(s.dropFirst(2)) : s)! }
func hexString(_ bytes: [UInt8]) -> String { Hex.encode(bytes) }
