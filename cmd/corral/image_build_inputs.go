package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"corral/internal/image/dirtar"
	"corral/sdk/go/corral"
)

// buildLog prints the CLI's own progress (uploads, imports) to stderr;
// quiet keeps only warnings.
type buildLog struct {
	w     io.Writer
	quiet bool
}

func (l buildLog) info(format string, args ...any) {
	if !l.quiet {
		fmt.Fprintf(l.w, format+"\n", args...)
	}
}

func (l buildLog) warn(format string, args ...any) {
	fmt.Fprintf(l.w, "warning: "+format+"\n", args...)
}

// uploadCopies tars each copy step's source, uploads the layer unless the
// daemon has it, and sets the step's Layer. Every source is checked before
// anything is uploaded.
func uploadCopies(ctx context.Context, c *corral.Client, sf *buildSpecFile, log buildLog) error {
	for i, st := range sf.spec.Steps {
		if st.Copy == nil {
			continue
		}
		if _, err := os.Lstat(sf.resolvePath(st.Copy.Src)); err != nil {
			return fmt.Errorf("step %d (copy %s): %w", i+1, st.Copy.Src, err)
		}
	}
	for i, st := range sf.spec.Steps {
		if st.Copy == nil {
			continue
		}
		up, err := uploadCopy(ctx, c, sf.resolvePath(st.Copy.Src), st.Copy.Dst)
		if err != nil {
			return fmt.Errorf("step %d (copy %s): %w", i+1, st.Copy.Src, err)
		}
		reportSkipped(log, st.Copy.Src, up.stats)
		how := "on the daemon already"
		if up.uploaded {
			how = "uploaded"
		}
		log.info("[%d/%d] copy %s: layer %s (%d entries, %s) %s", i+1, len(sf.spec.Steps), st.Copy.Src,
			shortDigest(up.digest), up.stats.Entries, sizeString(up.stats.Bytes), how)
		sf.spec.Steps[i].Copy.Layer = up.digest
	}
	return nil
}

// copyUpload is what uploadCopy did.
type copyUpload struct {
	digest   string
	stats    dirtar.Stats
	uploaded bool // false: the daemon had the layer
}

// uploadCopy makes the layer of one copy step and sends it to the daemon
// unless the daemon has it.
func uploadCopy(ctx context.Context, c *corral.Client, src, dst string) (copyUpload, error) {
	f, err := os.CreateTemp("", "corral-copy-*.tar")
	if err != nil {
		return copyUpload{}, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	digest, st, err := copyLayer(f, src, dst)
	up := copyUpload{digest: digest, stats: st}
	if err != nil {
		return up, err
	}
	_, err = c.Layer(ctx, digest)
	if err == nil {
		return up, nil
	}
	if !corral.NotFound(err) {
		return up, fmt.Errorf("looking up layer %s: %w", digest, err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return up, err
	}
	info, err := c.UploadLayer(ctx, f)
	if err != nil {
		return up, fmt.Errorf("uploading layer %s: %w", digest, err)
	}
	if info.Digest != digest {
		return up, fmt.Errorf("uploaded layer %s, but the daemon stored %s", digest, info.Digest)
	}
	up.uploaded = true
	return up, nil
}

// copyLayer writes the normalized tar of src at dst to w and returns its
// digest, the layer's cache key.
func copyLayer(w io.Writer, src, dst string) (string, dirtar.Stats, error) {
	h := sha256.New()
	st, err := dirtar.Write(io.MultiWriter(w, h), src, dst, dirtar.Options{Normalize: true})
	if err != nil {
		return "", st, err
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), st, nil
}

func reportSkipped(log buildLog, src string, st dirtar.Stats) {
	if st.SkippedCount == 0 {
		return
	}
	more := ""
	if n := st.SkippedCount - len(st.Skipped); n > 0 {
		more = fmt.Sprintf(" and %d more", n)
	}
	log.warn("%s: left out %d device nodes, sockets or FIFOs: %s%s", src, st.SkippedCount, strings.Join(st.Skipped, ", "), more)
}

// importLocalBase imports a base given as a path (an archive or an OCI
// layout directory) and points the spec's base at the imported image.
func importLocalBase(ctx context.Context, c *corral.Client, sf *buildSpecFile, log buildLog) error {
	p, ok := localBase(sf, sf.spec.Base.Image)
	if !ok {
		return nil
	}
	fi, err := os.Stat(p)
	if err != nil {
		return fmt.Errorf("base %s: %w", sf.spec.Base.Image, err)
	}
	log.info("[base] importing %s", sf.spec.Base.Image)
	var digest string
	if fi.IsDir() {
		digest, err = importLayoutDir(ctx, c, p)
	} else {
		digest, err = importArchive(ctx, c, p)
	}
	if err != nil {
		return fmt.Errorf("base %s: %w", sf.spec.Base.Image, err)
	}
	log.info("[base] imported %s as %s", sf.spec.Base.Image, shortDigest(digest))
	sf.spec.Base.Image = digest
	return nil
}

// localBase says whether an image base names a local path: one that looks
// like a path ("./", "../", "/") or that exists.
func localBase(sf *buildSpecFile, ref string) (string, bool) {
	if ref == "" {
		return "", false
	}
	p := sf.resolvePath(ref)
	for _, prefix := range []string{"./", "../", "/"} {
		if strings.HasPrefix(ref, prefix) {
			return p, true
		}
	}
	_, err := os.Stat(p)
	return p, err == nil
}

func importArchive(ctx context.Context, c *corral.Client, p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	img, err := c.ImportImage(ctx, f, "")
	if err != nil {
		return "", fmt.Errorf("importing: %w", err)
	}
	return img.Digest, nil
}

// errImportEnded stops the tar writer once the import stopped reading.
var errImportEnded = errors.New("import ended")

// importLayoutDir streams a tar of an OCI layout directory to the daemon.
func importLayoutDir(ctx context.Context, c *corral.Client, dir string) (string, error) {
	pr, pw := io.Pipe()
	tarred := make(chan error, 1)
	go func() {
		_, err := dirtar.Write(pw, dir, "/", dirtar.Options{Normalize: true})
		pw.CloseWithError(err)
		tarred <- err
	}()
	img, err := c.ImportImage(ctx, pr, "")
	pr.CloseWithError(errImportEnded)
	if terr := <-tarred; terr != nil && !errors.Is(terr, errImportEnded) {
		return "", terr
	}
	if err != nil {
		return "", fmt.Errorf("importing: %w", err)
	}
	return img.Digest, nil
}

// shortDigest is a digest's algorithm and first 12 hex digits.
func shortDigest(d string) string {
	if len(d) > len("sha256:")+12 {
		return d[:len("sha256:")+12]
	}
	return d
}

// sizeString prints a byte count in the largest unit that keeps it >= 1.
func sizeString(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
