// Package tartest builds tar streams by hand for the tests and fuzz
// targets of the packages that read hostile layers (tarx, overlaytar,
// oci): the headers archive/tar's writer refuses to write (GNU sparse
// maps, extended headers of any shape) and checksums recomputed after a
// mutation, so a fuzzed header reaches the code under test. It is never
// part of the corral binary (test/deps checks that) and imports only the
// standard library.
package tartest

import (
	"archive/tar"
	"fmt"
	"slices"
)

// Entry is a USTAR header block of type typ for name and its body, padded
// to whole blocks. The header's mode is 0644, its owner 0:0, its time 0.
func Entry(typ byte, name string, body []byte) []byte {
	blk := make([]byte, 512)
	copy(blk[0:100], name)
	copy(blk[100:108], "0000644\x00")
	copy(blk[108:116], "0000000\x00")
	copy(blk[116:124], "0000000\x00")
	copy(blk[124:136], fmt.Sprintf("%011o\x00", len(body)))
	copy(blk[136:148], "00000000000\x00")
	blk[156] = typ
	copy(blk[257:265], "ustar\x0000")
	SetChecksum(blk)
	padded := make([]byte, (len(body)+511)/512*512)
	copy(padded, body)
	return append(blk, padded...)
}

// PAXRecords encodes key, value pairs as PAX extended header records
// ("<len> key=value\n", where len counts the whole record).
func PAXRecords(kv ...string) []byte {
	var b []byte
	for i := 0; i+1 < len(kv); i += 2 {
		rec := " " + kv[i] + "=" + kv[i+1] + "\n"
		n := len(rec) + 1
		for len(fmt.Sprint(n))+len(rec) != n {
			n++
		}
		b = fmt.Appendf(b, "%d%s", n, rec)
	}
	return b
}

// Sparse is a whole tar of one GNU sparse file name (PAX format 0.1) that
// claims size bytes from its one data byte: what archive/tar reads as a
// regular file of that size, zeros in the holes.
func Sparse(name string, size int64) []byte {
	return slices.Concat(
		Entry(tar.TypeXHeader, "PaxHeaders/"+name, PAXRecords("GNU.sparse.size", fmt.Sprint(size),
			"GNU.sparse.numblocks", "1", "GNU.sparse.map", "0,1")),
		Entry(tar.TypeReg, name, []byte("x")),
		make([]byte, 1024))
}

// SetChecksum writes the checksum of the header block blk: the sum of its
// bytes with the checksum field read as spaces, in octal.
func SetChecksum(blk []byte) {
	copy(blk[148:156], "        ")
	sum := 0
	for _, c := range blk {
		sum += int(c)
	}
	copy(blk[148:156], fmt.Sprintf("%06o\x00 ", sum))
}

// FixChecksums returns b with the checksum of every 512-byte block that
// carries the ustar magic recomputed. (A data block with the magic in it
// changes too, which does no harm to a fuzz input.)
func FixChecksums(b []byte) []byte {
	b = slices.Clone(b)
	for off := 0; off+512 <= len(b); off += 512 {
		if blk := b[off : off+512]; string(blk[257:262]) == "ustar" {
			SetChecksum(blk)
		}
	}
	return b
}
