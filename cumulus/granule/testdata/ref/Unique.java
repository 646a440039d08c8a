// Reference: Cumulus v21 generateUniqueGranuleId (deterministic form) in
// Java. Reads "hex(id)\thex(collectionId)\thashLength" lines, writes
// hex(UTF-8 of the unique ID) lines.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.Base64;
import java.util.HexFormat;

public class Unique {
    static String uniqueId(String id, String collectionId, int hashLength) throws Exception {
        byte[] digest = MessageDigest.getInstance("MD5").digest(collectionId.getBytes(StandardCharsets.UTF_8));
        String hash = Base64.getUrlEncoder().withoutPadding().encodeToString(digest).replace("_", "");
        return id + "_" + hash.substring(0, Math.min(hashLength, hash.length()));
    }

    public static void main(String[] args) throws Exception {
        HexFormat hex = HexFormat.of();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        StringBuilder out = new StringBuilder();
        for (String line; (line = in.readLine()) != null; ) {
            String[] f = line.split("\t", -1);
            String id = new String(hex.parseHex(f[0]), StandardCharsets.UTF_8);
            String coll = new String(hex.parseHex(f[1]), StandardCharsets.UTF_8);
            out.append(hex.formatHex(uniqueId(id, coll, Integer.parseInt(f[2])).getBytes(StandardCharsets.UTF_8))).append('\n');
        }
        System.out.print(out);
    }
}
