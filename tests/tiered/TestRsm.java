/*
 * The project's own RemoteStorageManager for tests: a real Kafka 4.1.0 broker tiers segments through it, in one of
 * the two open layouts kafka-index reads, to a dir or to an S3 API (moto's server on 127.0.0.1).
 *
 *   layout=kafka  Kafka's LocalTieredStorage layout, plain copies:
 *                 <prefix>kafka-tiered-storage/<topic>-<partition>-<topicId>/<offset:020>-<segmentId>.<suffix>
 *                 suffixes log, index, timeindex, txnindex (when the segment has one), snapshot,
 *                 leader_epoch_checkpoint.
 *   layout=aiven  Aiven's tiered-storage-for-apache-kafka layout:
 *                 <prefix><topic>-<topicId>/<partition>/<offset:020>-<segmentId>.{log,indexes,rsm-manifest}
 *                 the .log cut in chunk.size chunks, each zstd-compressed when compression=true; .indexes the
 *                 offset, time, producer snapshot, leader epoch and (when present) transaction indexes end to end;
 *                 the manifest their ranges and the chunk index (fixed, or variable: base64 of zstd of Aiven's
 *                 binary list of chunk sizes). With custom.metadata=true the segment's custom metadata holds
 *                 Aiven's tagged fields (0 remote_size, 1 object_prefix, 2 object_key).
 *
 * Back end: dir=<path>, or s3.endpoint=http://127.0.0.1:<port> with s3.bucket (path-style requests carrying a
 * SigV4-shaped Authorization header, which moto accepts without checking the signature). Written from the
 * RemoteStorageManager interface and the layouts' descriptions, for tests only: no retries, no caches.
 */
package kafkaindex.tiered;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.github.luben.zstd.Zstd;
import org.apache.kafka.common.protocol.types.Field;
import org.apache.kafka.common.protocol.types.Schema;
import org.apache.kafka.common.protocol.types.Struct;
import org.apache.kafka.common.protocol.types.Type;
import org.apache.kafka.server.log.remote.storage.LogSegmentData;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentMetadata;
import org.apache.kafka.server.log.remote.storage.RemoteResourceNotFoundException;
import org.apache.kafka.server.log.remote.storage.RemoteStorageException;
import org.apache.kafka.server.log.remote.storage.RemoteStorageManager;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;

public final class TestRsm implements RemoteStorageManager {
    private static final String[] KAFKA_SUFFIXES = {"log", "index", "timeindex", "txnindex", "snapshot",
        "leader_epoch_checkpoint"};
    private static final String[] AIVEN_SUFFIXES = {"log", "indexes", "rsm-manifest"};
    // Aiven's custom metadata: Kafka tagged fields of one struct (SegmentCustomMetadataField)
    private static final Schema CUSTOM_METADATA = new Schema(Field.TaggedFieldsSection.of(
        0, new Field("remote_size", Type.VARLONG),
        1, new Field("object_prefix", Type.COMPACT_STRING),
        2, new Field("object_key", Type.COMPACT_STRING)));
    private static final ObjectMapper JSON = new ObjectMapper();

    private Backend backend;
    private boolean aiven;
    private String prefix;
    private int chunkSize;
    private boolean compression;
    private boolean customMetadata;

    @Override
    public void configure(final Map<String, ?> configs) {
        aiven = "aiven".equals(setting(configs, "layout", "kafka"));
        prefix = setting(configs, "prefix", "");
        chunkSize = Integer.parseInt(setting(configs, "chunk.size", "262144"));
        compression = Boolean.parseBoolean(setting(configs, "compression", "false"));
        customMetadata = Boolean.parseBoolean(setting(configs, "custom.metadata", "false"));
        final Object endpoint = configs.get("s3.endpoint");
        backend = endpoint != null
            ? new S3Backend(endpoint.toString(), setting(configs, "s3.bucket", "tiered"))
            : new DirBackend(Paths.get(setting(configs, "dir", null)));
    }

    private static String setting(final Map<String, ?> configs, final String key, final String otherwise) {
        final Object value = configs.get(key);
        if (value == null && otherwise == null) {
            throw new IllegalArgumentException("TestRsm needs rsm.config." + key);
        }
        return value == null ? otherwise : value.toString();
    }

    // ------------------------------------------------------------------------------------------ keys
    private String mainPath(final RemoteLogSegmentMetadata md) {
        final var tip = md.remoteLogSegmentId().topicIdPartition();
        final String name = String.format("%020d-%s", md.startOffset(), md.remoteLogSegmentId().id());
        if (aiven) {
            return tip.topic() + "-" + tip.topicId() + "/" + tip.partition() + "/" + name;
        }
        return "kafka-tiered-storage/" + tip.topic() + "-" + tip.partition() + "-" + tip.topicId() + "/" + name;
    }

    private String key(final RemoteLogSegmentMetadata md, final String suffix) {
        return prefix + mainPath(md) + "." + suffix;
    }

    // ------------------------------------------------------------------------------------------ copy
    @Override
    public Optional<RemoteLogSegmentMetadata.CustomMetadata> copyLogSegmentData(
        final RemoteLogSegmentMetadata md, final LogSegmentData data) throws RemoteStorageException {
        try {
            final byte[] epochs = bytesOf(data.leaderEpochIndex());
            if (!aiven) {
                backend.put(key(md, "log"), Files.readAllBytes(data.logSegment()));
                backend.put(key(md, "index"), Files.readAllBytes(data.offsetIndex()));
                backend.put(key(md, "timeindex"), Files.readAllBytes(data.timeIndex()));
                if (data.transactionIndex().isPresent()) {
                    backend.put(key(md, "txnindex"), Files.readAllBytes(data.transactionIndex().get()));
                }
                backend.put(key(md, "leader_epoch_checkpoint"), epochs);
                backend.put(key(md, "snapshot"), Files.readAllBytes(data.producerSnapshotIndex()));
                return Optional.empty();
            }
            long remoteSize = 0;
            final ObjectNode manifest = JSON.createObjectNode();
            manifest.put("version", "1");
            final byte[] log = Files.readAllBytes(data.logSegment());
            final ByteArrayOutputStream chunks = new ByteArrayOutputStream();
            final List<Integer> sizes = new ArrayList<>();
            for (int at = 0; at < log.length; at += chunkSize) {
                final byte[] chunk = Arrays.copyOfRange(log, at, Math.min(log.length, at + chunkSize));
                final byte[] stored = compression ? Zstd.compress(chunk) : chunk;
                chunks.write(stored);
                sizes.add(stored.length);
            }
            final ObjectNode chunkIndex = manifest.putObject("chunkIndex");
            chunkIndex.put("type", compression ? "variable" : "fixed");
            chunkIndex.put("originalChunkSize", chunkSize);
            chunkIndex.put("originalFileSize", log.length);
            if (compression) {
                chunkIndex.put("transformedChunks",
                    Base64.getEncoder().encodeToString(Zstd.compress(encodeChunkSizes(sizes))));
            } else {
                chunkIndex.put("transformedChunkSize", chunkSize);
                chunkIndex.put("finalTransformedChunkSize", sizes.isEmpty() ? 0 : sizes.get(sizes.size() - 1));
            }
            final ByteArrayOutputStream indexes = new ByteArrayOutputStream();
            final ObjectNode ranges = manifest.putObject("segmentIndexes");
            addIndex(indexes, ranges, "offset", Files.readAllBytes(data.offsetIndex()));
            addIndex(indexes, ranges, "timestamp", Files.readAllBytes(data.timeIndex()));
            addIndex(indexes, ranges, "producerSnapshot", Files.readAllBytes(data.producerSnapshotIndex()));
            addIndex(indexes, ranges, "leaderEpoch", epochs);
            if (data.transactionIndex().isPresent()) {
                addIndex(indexes, ranges, "transaction", Files.readAllBytes(data.transactionIndex().get()));
            } else {
                ranges.putNull("transaction");
            }
            manifest.put("compression", compression);
            manifest.set("remoteLogSegmentMetadata", metadataJson(md));
            final byte[] manifestBytes = JSON.writeValueAsBytes(manifest);
            backend.put(key(md, "log"), chunks.toByteArray());
            backend.put(key(md, "indexes"), indexes.toByteArray());
            backend.put(key(md, "rsm-manifest"), manifestBytes);
            remoteSize = chunks.size() + indexes.size() + manifestBytes.length;
            if (!customMetadata) {
                return Optional.empty();
            }
            final Struct struct = new Struct(CUSTOM_METADATA);
            final TreeMap<Integer, Object> fields = new TreeMap<>();
            fields.put(0, remoteSize);
            fields.put(1, prefix);
            fields.put(2, mainPath(md));
            struct.set("_tagged_fields", fields);
            final ByteBuffer buffer = ByteBuffer.allocate(struct.sizeOf());
            struct.writeTo(buffer);
            return Optional.of(new RemoteLogSegmentMetadata.CustomMetadata(buffer.array()));
        } catch (final IOException e) {
            throw new RemoteStorageException("copy of " + md.remoteLogSegmentId() + " failed", e);
        }
    }

    private static byte[] bytesOf(final ByteBuffer buffer) {
        final ByteBuffer copy = buffer.duplicate();
        final byte[] out = new byte[copy.remaining()];
        copy.get(out);
        return out;
    }

    private static void addIndex(final ByteArrayOutputStream all, final ObjectNode ranges, final String name,
                                 final byte[] bytes) {
        final ObjectNode range = ranges.putObject(name);
        range.put("position", all.size());
        range.put("size", bytes.length);
        all.writeBytes(bytes);
    }

    /** Aiven's binary list of chunk sizes: count, then (for two or more) the base, the bytes per value and each
     * value but the last less the base, big-endian in that many bytes; the last value in 4 bytes. */
    static byte[] encodeChunkSizes(final List<Integer> values) {
        final int count = values.size();
        if (count <= 1) {
            final ByteBuffer buf = ByteBuffer.allocate(4 + 4 * count).putInt(count);
            if (count == 1) {
                buf.putInt(values.get(0));
            }
            return buf.array();
        }
        final int base = values.subList(0, count - 1).stream().mapToInt(Integer::intValue).min().getAsInt();
        int width = 1;
        for (final int v : values.subList(0, count - 1)) {
            final int d = v - base;
            width = Math.max(width, d <= 0xFF ? 1 : d <= 0xFFFF ? 2 : d <= 0xFFFFFF ? 3 : 4);
        }
        final ByteBuffer buf = ByteBuffer.allocate(4 + 4 + 1 + (count - 1) * width + 4);
        buf.putInt(count).putInt(base).put((byte) width);
        for (final int v : values.subList(0, count - 1)) {
            final byte[] full = ByteBuffer.allocate(4).putInt(v - base).array();
            buf.put(full, 4 - width, width);
        }
        buf.putInt(values.get(count - 1));
        return buf.array();
    }

    /** The segment's metadata as Aiven's manifest holds it (what Kafka's own JSON of it would say). */
    private static ObjectNode metadataJson(final RemoteLogSegmentMetadata md) {
        final ObjectNode out = JSON.createObjectNode();
        final ObjectNode id = out.putObject("remoteLogSegmentId");
        final ObjectNode tip = id.putObject("topicIdPartition");
        tip.put("topicId", md.topicIdPartition().topicId().toString());
        final ObjectNode tp = tip.putObject("topicPartition");
        tp.put("topic", md.topicIdPartition().topic());
        tp.put("partition", md.topicIdPartition().partition());
        id.put("id", md.remoteLogSegmentId().id().toString());
        out.put("startOffset", md.startOffset());
        out.put("endOffset", md.endOffset());
        out.put("maxTimestampMs", md.maxTimestampMs());
        out.put("brokerId", md.brokerId());
        out.put("eventTimestampMs", md.eventTimestampMs());
        final ObjectNode epochs = out.putObject("segmentLeaderEpochs");
        md.segmentLeaderEpochs().forEach((epoch, offset) -> epochs.put(epoch.toString(), offset));
        return out;
    }

    // ------------------------------------------------------------------------------------------ fetch
    @Override
    public InputStream fetchLogSegment(final RemoteLogSegmentMetadata md, final int startPosition)
        throws RemoteStorageException {
        return fetchLogSegment(md, startPosition, Integer.MAX_VALUE);
    }

    @Override
    public InputStream fetchLogSegment(final RemoteLogSegmentMetadata md, final int startPosition,
                                       final int endPosition) throws RemoteStorageException {
        if (!aiven) {
            return new ByteArrayInputStream(backend.get(key(md, "log"), startPosition, endPosition));
        }
        try {
            final var index = JSON.readTree(backend.get(key(md, "rsm-manifest"), 0, Integer.MAX_VALUE))
                .get("chunkIndex");
            final int original = index.get("originalChunkSize").asInt();
            final int fileSize = index.get("originalFileSize").asInt();
            final int last = Math.min(endPosition, fileSize - 1);
            if (startPosition > last) {
                return new ByteArrayInputStream(new byte[0]);
            }
            final int count = (fileSize + original - 1) / original;
            final long[] starts = new long[count + 1];
            final List<Integer> sizes = index.has("transformedChunks")
                ? decodeChunkSizes(unzstd(Base64.getDecoder().decode(index.get("transformedChunks").asText())))
                : null;
            for (int i = 0; i < count; i++) {
                final int size = sizes != null ? sizes.get(i)
                    : i == count - 1 ? index.get("finalTransformedChunkSize").asInt()
                    : index.get("transformedChunkSize").asInt();
                starts[i + 1] = starts[i] + size;
            }
            final int first = startPosition / original;
            final int end = last / original;
            final byte[] stored = backend.get(key(md, "log"), starts[first], starts[end + 1] - 1);
            final ByteArrayOutputStream plain = new ByteArrayOutputStream();
            for (int i = first; i <= end; i++) {
                final byte[] chunk = Arrays.copyOfRange(stored, (int) (starts[i] - starts[first]),
                    (int) (starts[i + 1] - starts[first]));
                final int originalSize = i == count - 1 ? fileSize - i * original : original;
                plain.writeBytes(sizes != null ? Zstd.decompress(chunk, originalSize) : chunk);
            }
            final byte[] all = plain.toByteArray();
            final int from = startPosition - first * original;
            return new ByteArrayInputStream(all, from, last - startPosition + 1);
        } catch (final IOException e) {
            throw new RemoteStorageException("fetch of " + md.remoteLogSegmentId() + " failed", e);
        }
    }

    private static byte[] unzstd(final byte[] frame) {
        return Zstd.decompress(frame, (int) Zstd.getFrameContentSize(frame));
    }

    static List<Integer> decodeChunkSizes(final byte[] bytes) {
        final ByteBuffer buf = ByteBuffer.wrap(bytes);
        final int count = buf.getInt();
        final List<Integer> out = new ArrayList<>();
        if (count == 1) {
            out.add(buf.getInt());
        } else if (count > 1) {
            final int base = buf.getInt();
            final int width = buf.get();
            for (int i = 0; i < count - 1; i++) {
                int v = 0;
                for (int b = 0; b < width; b++) {
                    v = (v << 8) | (buf.get() & 0xFF);
                }
                out.add(v + base);
            }
            out.add(buf.getInt());
        }
        return out;
    }

    @Override
    public InputStream fetchIndex(final RemoteLogSegmentMetadata md, final IndexType type)
        throws RemoteStorageException {
        if (!aiven) {
            final String suffix = switch (type) {
                case OFFSET -> "index";
                case TIMESTAMP -> "timeindex";
                case PRODUCER_SNAPSHOT -> "snapshot";
                case TRANSACTION -> "txnindex";
                case LEADER_EPOCH -> "leader_epoch_checkpoint";
            };
            return new ByteArrayInputStream(backend.get(key(md, suffix), 0, Integer.MAX_VALUE));
        }
        final String name = switch (type) {
            case OFFSET -> "offset";
            case TIMESTAMP -> "timestamp";
            case PRODUCER_SNAPSHOT -> "producerSnapshot";
            case TRANSACTION -> "transaction";
            case LEADER_EPOCH -> "leaderEpoch";
        };
        try {
            final var range = JSON.readTree(backend.get(key(md, "rsm-manifest"), 0, Integer.MAX_VALUE))
                .get("segmentIndexes").get(name);
            if (range == null || range.isNull()) {
                throw new RemoteResourceNotFoundException("no " + name + " index in the manifest of "
                    + md.remoteLogSegmentId());
            }
            final int position = range.get("position").asInt();
            final int size = range.get("size").asInt();
            if (size == 0) {
                return new ByteArrayInputStream(new byte[0]);
            }
            return new ByteArrayInputStream(backend.get(key(md, "indexes"), position, position + size - 1));
        } catch (final IOException e) {
            throw new RemoteStorageException("fetch of the " + name + " index of " + md.remoteLogSegmentId(), e);
        }
    }

    @Override
    public void deleteLogSegmentData(final RemoteLogSegmentMetadata md) throws RemoteStorageException {
        for (final String suffix : aiven ? AIVEN_SUFFIXES : KAFKA_SUFFIXES) {
            backend.delete(key(md, suffix));
        }
    }

    @Override
    public void close() {
    }

    // ------------------------------------------------------------------------------------------ back ends
    interface Backend {
        void put(String key, byte[] data) throws RemoteStorageException;

        /** Bytes first..last (inclusive; last past the end means to the end); a missing key is
         * RemoteResourceNotFoundException. */
        byte[] get(String key, long first, long last) throws RemoteStorageException;

        void delete(String key) throws RemoteStorageException;
    }

    static final class DirBackend implements Backend {
        private final Path root;

        DirBackend(final Path root) {
            this.root = root;
        }

        @Override
        public void put(final String key, final byte[] data) throws RemoteStorageException {
            try {
                final Path target = root.resolve(key);
                Files.createDirectories(target.getParent());
                final Path tmp = target.resolveSibling(target.getFileName() + ".tmp");
                Files.write(tmp, data);
                Files.move(tmp, target, StandardCopyOption.ATOMIC_MOVE);
            } catch (final IOException e) {
                throw new RemoteStorageException("write of " + key + " failed", e);
            }
        }

        @Override
        public byte[] get(final String key, final long first, final long last) throws RemoteStorageException {
            try {
                final byte[] all = Files.readAllBytes(root.resolve(key));
                final int end = (int) Math.min(all.length, last + 1);
                return first >= end ? new byte[0] : Arrays.copyOfRange(all, (int) first, end);
            } catch (final NoSuchFileException e) {
                throw new RemoteResourceNotFoundException(key + " not found");
            } catch (final IOException e) {
                throw new RemoteStorageException("read of " + key + " failed", e);
            }
        }

        @Override
        public void delete(final String key) throws RemoteStorageException {
            try {
                Files.deleteIfExists(root.resolve(key));
            } catch (final IOException e) {
                throw new RemoteStorageException("delete of " + key + " failed", e);
            }
        }
    }

    static final class S3Backend implements Backend {
        private final HttpClient http = HttpClient.newHttpClient();
        private final String base;

        S3Backend(final String endpoint, final String bucket) {
            this.base = endpoint.replaceAll("/+$", "") + "/" + bucket + "/";
        }

        private HttpRequest.Builder request(final String key) {
            return HttpRequest.newBuilder(URI.create(base + key))
                .header("x-amz-date", "20260101T000000Z")
                .header("x-amz-content-sha256", "UNSIGNED-PAYLOAD")
                .header("Authorization", "AWS4-HMAC-SHA256 Credential=testing/20260101/us-east-1/s3/aws4_request, "
                    + "SignedHeaders=host;x-amz-content-sha256;x-amz-date, Signature=0");
        }

        private HttpResponse<byte[]> send(final HttpRequest req, final String what) throws RemoteStorageException {
            try {
                return http.send(req, HttpResponse.BodyHandlers.ofByteArray());
            } catch (final IOException e) {
                throw new RemoteStorageException(what + " failed", e);
            } catch (final InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new RemoteStorageException(what + " interrupted", e);
            }
        }

        @Override
        public void put(final String key, final byte[] data) throws RemoteStorageException {
            final var res = send(request(key).PUT(HttpRequest.BodyPublishers.ofByteArray(data)).build(), "PUT " + key);
            if (res.statusCode() != 200) {
                throw new RemoteStorageException("PUT " + key + ": HTTP " + res.statusCode());
            }
        }

        @Override
        public byte[] get(final String key, final long first, final long last) throws RemoteStorageException {
            final String range = "bytes=" + first + "-" + (last >= Integer.MAX_VALUE ? "" : Long.toString(last));
            final var res = send(request(key).header("Range", range).GET().build(), "GET " + key);
            if (res.statusCode() == 404) {
                throw new RemoteResourceNotFoundException(key + " not found");
            }
            if (res.statusCode() == 416) {
                return new byte[0];
            }
            if (res.statusCode() != 200 && res.statusCode() != 206) {
                throw new RemoteStorageException("GET " + key + ": HTTP " + res.statusCode());
            }
            return res.body();
        }

        @Override
        public void delete(final String key) throws RemoteStorageException {
            final var res = send(request(key).DELETE().build(), "DELETE " + key);
            if (res.statusCode() != 204 && res.statusCode() != 200 && res.statusCode() != 404) {
                throw new RemoteStorageException("DELETE " + key + ": HTTP " + res.statusCode());
            }
        }
    }
}
