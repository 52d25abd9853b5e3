import Foundation
import Polkadot

extension SignerPayload {
    /// A payload written as a dictionary in a test, read as the server reads a request's text.
    init(json: [String: Any]) throws {
        try self.init(data: [UInt8](try JSONSerialization.data(withJSONObject: json)))
    }
}
