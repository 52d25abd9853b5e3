import Foundation

/// The operator's attestation trust anchors: `<dir>/<format>/*.pem` (e.g. `tpm/`, `packed/`,
/// `apple/`). With none for a format, Keyfob records what the client claimed and says
/// `attestationTrusted: false`.
enum AttestationRoots {
    static let formats = ["packed", "tpm", "android-key", "android-safetynet", "fido-u2f", "apple"]

    static func load(from directory: String) throws(ServerConfiguration.Invalid) -> [String: [[UInt8]]] {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw .init(
                description:
                    "--attestation-roots \(directory) is not a folder (it holds one subfolder of PEM roots per format: \(formats.joined(separator: ", ")))"
            )
        }
        var anchors: [String: [[UInt8]]] = [:]
        for format in formats {
            let folder = (directory as NSString).appendingPathComponent(format)
            guard let names = try? FileManager.default.contentsOfDirectory(atPath: folder) else { continue }
            for name in names.sorted() where name.hasSuffix(".pem") || name.hasSuffix(".crt") {
                let path = (folder as NSString).appendingPathComponent(name)
                guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
                    throw .init(description: "cannot read attestation root \(path)")
                }
                let certificates = pemCertificates(text)
                guard !certificates.isEmpty else {
                    throw .init(description: "attestation root \(path) holds no PEM certificate (-----BEGIN CERTIFICATE-----)")
                }
                anchors[format, default: []] += certificates
            }
        }
        return anchors
    }

    /// Every `CERTIFICATE` block of a PEM text, as DER.
    static func pemCertificates(_ text: String) -> [[UInt8]] {
        var out: [[UInt8]] = []
        var body: String?
        for line in text.split(whereSeparator: \.isNewline).map({ $0.trimmingCharacters(in: .whitespaces) }) {
            if line == "-----BEGIN CERTIFICATE-----" {
                body = ""
            } else if line == "-----END CERTIFICATE-----" {
                if let base64 = body, let der = Data(base64Encoded: base64) { out.append([UInt8](der)) }
                body = nil
            } else if body != nil {
                body! += line
            }
        }
        return out
    }
}
