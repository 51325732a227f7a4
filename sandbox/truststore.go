package sandbox

import (
	"bytes"
	"crypto/sha1" //nolint:gosec // the JKS format's integrity digest is SHA-1
	"encoding/binary"
	"encoding/pem"
	"errors"
	"fmt"
	"time"
	"unicode/utf16"
)

// JavaTrustStorePassword is the password of the trust store
// JavaTrustStore writes (Java's usual one: it guards nothing, the store
// holds public certificates only).
const JavaTrustStorePassword = "changeit"

// JavaTrustStore encodes the certificates of a PEM bundle as a Java trust
// store (the JKS format, which every JVM reads), for the JVM clients
// (Gradle, Maven, sbt) that read no PEM bundle: javax.net.ssl.trustStore
// points them at it. Blocks that are not certificates are skipped; a bundle
// without any is an error.
func JavaTrustStore(bundle []byte, now time.Time) ([]byte, error) {
	var certs [][]byte
	for rest := bundle; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type == "CERTIFICATE" {
			certs = append(certs, b.Bytes)
		}
	}
	if len(certs) == 0 {
		return nil, errors.New("java trust store: no certificate in the bundle")
	}
	var buf bytes.Buffer
	u32 := func(v uint32) { binary.Write(&buf, binary.BigEndian, v) } // a bytes.Buffer does not fail
	u32(0xFEEDFEED)                                                   // magic
	u32(2)                                                            // version
	u32(uint32(len(certs)))
	for i, der := range certs {
		u32(2) // a trusted certificate entry
		alias := fmt.Sprintf("shiro-%d", i)
		binary.Write(&buf, binary.BigEndian, uint16(len(alias)))
		buf.WriteString(alias)
		binary.Write(&buf, binary.BigEndian, uint64(now.UnixMilli()))
		binary.Write(&buf, binary.BigEndian, uint16(len("X.509")))
		buf.WriteString("X.509")
		u32(uint32(len(der)))
		buf.Write(der)
	}
	// The digest: SHA-1 of the password (UTF-16, big-endian), the words
	// "Mighty Aphrodite" and everything before it.
	h := sha1.New() //nolint:gosec // the format's
	for _, c := range utf16.Encode([]rune(JavaTrustStorePassword)) {
		h.Write([]byte{byte(c >> 8), byte(c)})
	}
	h.Write([]byte("Mighty Aphrodite"))
	h.Write(buf.Bytes())
	buf.Write(h.Sum(nil))
	return buf.Bytes(), nil
}
