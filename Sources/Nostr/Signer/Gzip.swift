import CZlib

/// gzip via zlib, for DIP-05's `Signer1` payloads and NIP-155's `compressionType=gzip`.
enum Gzip {
    static func compress(_ input: [UInt8]) -> [UInt8]? {
        var stream = z_stream()
        // windowBits 15 + 16: write a gzip header and trailer.
        guard
            deflateInit2_(
                &stream, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY,
                ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size)) == Z_OK
        else { return nil }
        defer { deflateEnd(&stream) }
        var output = [UInt8](repeating: 0, count: Int(deflateBound(&stream, uLong(input.count))) + 32)
        var input = input
        let status = input.withUnsafeMutableBufferPointer { inBuffer in
            output.withUnsafeMutableBufferPointer { outBuffer -> Int32 in
                stream.next_in = inBuffer.baseAddress
                stream.avail_in = uInt(inBuffer.count)
                stream.next_out = outBuffer.baseAddress
                stream.avail_out = uInt(outBuffer.count)
                return deflate(&stream, Z_FINISH)
            }
        }
        guard status == Z_STREAM_END else { return nil }
        return Array(output.prefix(Int(stream.total_out)))
    }

    /// Inflates gzip (or zlib) data, refusing output past `limit` bytes (decompression bombs).
    static func decompress(_ input: [UInt8], limit: Int) -> [UInt8]? {
        guard !input.isEmpty else { return nil }
        var stream = z_stream()
        // windowBits 15 + 32: detect gzip or zlib headers.
        guard inflateInit2_(&stream, 15 + 32, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size)) == Z_OK else { return nil }
        defer { inflateEnd(&stream) }
        var input = input
        var output: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        return input.withUnsafeMutableBufferPointer { inBuffer -> [UInt8]? in
            stream.next_in = inBuffer.baseAddress
            stream.avail_in = uInt(inBuffer.count)
            while true {
                let (status, produced) = chunk.withUnsafeMutableBufferPointer { outBuffer -> (Int32, Int) in
                    stream.next_out = outBuffer.baseAddress
                    stream.avail_out = uInt(outBuffer.count)
                    let status = inflate(&stream, Z_NO_FLUSH)
                    return (status, outBuffer.count - Int(stream.avail_out))
                }
                guard status == Z_OK || status == Z_STREAM_END else { return nil }
                output += chunk.prefix(produced)
                guard output.count <= limit else { return nil }
                if status == Z_STREAM_END { return stream.avail_in == 0 ? output : nil }
                if produced == 0 && stream.avail_in == 0 { return nil }  // truncated
            }
        }
    }
}
