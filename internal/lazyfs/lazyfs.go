//go:build linux

// Package lazyfs is a FUSE file system for power-loss tests: it keeps what
// was written but not yet fsynced apart from what was fsynced, and can throw
// the former away, as a machine that loses power does.
//
// It owns two directories it is given and one mount point. Everything a
// process writes under the mount point goes to the cache directory at once
// (the page cache: later reads see it, and a SIGKILL of the writer keeps
// it). The disk directory holds what would survive a power cut: a file's
// data reaches it only when the file is fsynced (fsync or fdatasync), and
// PowerOff rebuilds the cache directory from it, dropping every byte not
// synced. PowerOff can also tear the unsynced tail: it keeps a random prefix
// of each file's unsynced bytes, as a disk that wrote some of its queued
// pages before the cut. FailSyncs makes fsync fail with EIO and forget the
// unsynced data, as Linux does when writeback fails.
//
// The model: file data is durable only after an fsync of the file; creating,
// renaming and removing files and directories is durable at once (as on a
// journaling file system whose metadata commit is synchronous). A program
// that relies on an unsynced directory entry is therefore not caught; one
// that relies on unsynced file data is.
//
// Tests only: it needs root (or fusermount) and /dev/fuse.
package lazyfs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// FS is a mounted (or powered-off) lazy file system.
type FS struct {
	mnt, cache, disk string

	mu        sync.Mutex
	server    *fuse.Server
	dirty     map[*node]struct{} // nodes with unsynced data
	failSyncs bool
	syncs     uint64
}

// Mount mounts a lazy file system at mnt, with its page cache in cache and
// its durable image in disk; all three directories must exist, and cache
// and disk must be empty.
func Mount(mnt, cache, disk string) (*FS, error) {
	l := &FS{mnt: mnt, cache: cache, disk: disk, dirty: map[*node]struct{}{}}
	if err := l.mount(); err != nil {
		return nil, err
	}
	return l, nil
}

// Available reports whether this process can mount FUSE file systems, and
// why not when it cannot.
func Available() error {
	f, err := os.OpenFile("/dev/fuse", os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("lazyfs: FUSE is not available: %w", err)
	}
	return f.Close()
}

func (l *FS) mount() error {
	var st syscall.Stat_t
	if err := syscall.Stat(l.cache, &st); err != nil {
		return fmt.Errorf("lazyfs: %w", err)
	}
	root := &fs.LoopbackRoot{Path: l.cache, Dev: st.Dev}
	root.RootNode = &node{LoopbackNode: &fs.LoopbackNode{RootData: root}, l: l}
	zero := time.Duration(0)
	server, err := fs.Mount(l.mnt, root.RootNode, &fs.Options{
		// No kernel caching of names and attributes: the cache directory
		// changes under the kernel at PowerOff.
		EntryTimeout: &zero, AttrTimeout: &zero, NegativeTimeout: &zero,
		MountOptions: fuse.MountOptions{
			DirectMount: true, FsName: "lazyfs", Name: "lazyfs",
			DisableXAttrs: true,
		},
	})
	if err != nil {
		return fmt.Errorf("lazyfs: mount %s: %w", l.mnt, err)
	}
	l.mu.Lock()
	l.server = server
	l.mu.Unlock()
	return nil
}

// FailSyncs makes every fsync from now on fail with EIO (on) or succeed
// again (off). A failed fsync forgets the file's unsynced data: it stays
// readable until PowerOff, which loses it.
func (l *FS) FailSyncs(on bool) {
	l.mu.Lock()
	l.failSyncs = on
	l.mu.Unlock()
}

// Syncs returns how many file fsyncs succeeded since Mount.
func (l *FS) Syncs() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.syncs
}

// PowerOff cuts the power and brings it back: it unmounts the file system
// (every process using it must be gone), drops all unsynced data, or with
// torn set keeps a random prefix of each file's unsynced bytes, and mounts
// the durable image again at the same place. It returns how many files lost
// unsynced data.
func (l *FS) PowerOff(torn bool, rnd *rand.Rand) (int, error) {
	l.mu.Lock()
	server := l.server
	l.server = nil
	l.mu.Unlock()
	if server != nil {
		if err := unmount(server); err != nil {
			return 0, err
		}
	}
	l.mu.Lock()
	dirty := l.dirty
	l.dirty = map[*node]struct{}{}
	l.failSyncs = false
	l.mu.Unlock()
	if torn {
		for n := range dirty {
			if err := n.tear(rnd); err != nil {
				return 0, err
			}
		}
	}
	if err := os.RemoveAll(l.cache); err != nil {
		return 0, fmt.Errorf("lazyfs: %w", err)
	}
	if err := copyTree(l.disk, l.cache); err != nil {
		return 0, err
	}
	return len(dirty), l.mount()
}

// Unmount unmounts the file system, keeping the cache directory as it is.
func (l *FS) Unmount() error {
	l.mu.Lock()
	server := l.server
	l.server = nil
	l.mu.Unlock()
	if server == nil {
		return nil
	}
	return unmount(server)
}

// unmount retries while the kernel still holds the mount busy (a killed
// process's files are closed shortly after it is reaped).
func unmount(s *fuse.Server) error {
	var err error
	for range 100 {
		if err = s.Unmount(); err == nil {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("lazyfs: unmount: %w", err)
}

// node is a file or directory; its unsynced data is the byte range
// [lo, hi) of the cache file, and sizeDirty says its size changed.
type node struct {
	*fs.LoopbackNode
	l *FS

	mu        sync.Mutex
	lo, hi    int64
	hasData   bool
	sizeDirty bool
}

// paths returns where name, under this directory node, or the node itself
// (name ""), lives in the cache and disk directories; ok is false for a
// node no longer linked into the tree.
// WrapChild makes every node of the tree a node of this file system.
func (n *node) WrapChild(_ context.Context, ops fs.InodeEmbedder) fs.InodeEmbedder {
	return &node{LoopbackNode: ops.(*fs.LoopbackNode), l: n.l}
}

func (n *node) paths(name string) (cache, disk string, ok bool) {
	if !n.IsRoot() {
		if _, parent := n.Parent(); parent == nil {
			return "", "", false
		}
	}
	rel := filepath.Join(n.Path(n.Root()), name)
	return filepath.Join(n.l.cache, rel), filepath.Join(n.l.disk, rel), true
}

// written records the unsynced range [off, off+size).
func (n *node) written(off, size int64) {
	n.mu.Lock()
	if !n.hasData {
		n.lo, n.hi, n.hasData = off, off+size, true
	} else {
		n.lo, n.hi = min(n.lo, off), max(n.hi, off+size)
	}
	n.mu.Unlock()
	n.markDirty()
}

func (n *node) resized() {
	n.mu.Lock()
	n.sizeDirty = true
	n.mu.Unlock()
	n.markDirty()
}

func (n *node) markDirty() {
	n.l.mu.Lock()
	n.l.dirty[n] = struct{}{}
	n.l.mu.Unlock()
}

// sync copies the unsynced data to the disk image.
func (n *node) sync() syscall.Errno {
	n.l.mu.Lock()
	fail := n.l.failSyncs
	if !fail {
		n.l.syncs++
	}
	delete(n.l.dirty, n)
	n.l.mu.Unlock()
	n.mu.Lock()
	defer n.mu.Unlock()
	if fail {
		n.hasData, n.sizeDirty = false, false
		return syscall.EIO
	}
	if !n.hasData && !n.sizeDirty {
		return 0
	}
	err := n.copyOut(n.lo, n.hi, true)
	n.hasData, n.sizeDirty = false, false
	return fs.ToErrno(err)
}

// tear keeps a random prefix of the unsynced range, at power off.
func (n *node) tear(rnd *rand.Rand) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.hasData || n.hi <= n.lo {
		return nil
	}
	keep := rnd.Int64N(n.hi - n.lo + 1)
	return n.copyOut(n.lo, n.lo+keep, false)
}

// copyOut copies bytes [lo, hi) of the cache file to the disk file and,
// with setSize, gives the disk file the cache file's size.
func (n *node) copyOut(lo, hi int64, setSize bool) error {
	cachePath, diskPath, ok := n.paths("")
	if !ok {
		return nil // removed: its data no longer matters
	}
	src, err := os.Open(cachePath)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.OpenFile(diskPath, os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	defer dst.Close()
	st, err := src.Stat()
	if err != nil {
		return err
	}
	hi = min(hi, st.Size())
	if n.hasData && hi > lo {
		if _, err := io.Copy(io.NewOffsetWriter(dst, lo), io.NewSectionReader(src, lo, hi-lo)); err != nil {
			return err
		}
	}
	if setSize {
		return dst.Truncate(st.Size())
	}
	return nil
}

// file wraps a loopback file handle to track writes and syncs.
type file struct {
	*fs.LoopbackFile
	n *node
}

func (n *node) wrap(fh fs.FileHandle) fs.FileHandle {
	lf, ok := fh.(*fs.LoopbackFile)
	if !ok {
		return fh
	}
	return &file{LoopbackFile: lf, n: n}
}

// PassthroughFd keeps the kernel from bypassing the file system.
func (f *file) PassthroughFd() (int, bool) { return -1, false }

func (f *file) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	w, errno := f.LoopbackFile.Write(ctx, data, off)
	if w > 0 {
		f.n.written(off, int64(w))
	}
	return w, errno
}

func (f *file) Writev(ctx context.Context, data [][]byte, off int64) (uint32, syscall.Errno) {
	w, errno := f.LoopbackFile.Writev(ctx, data, off)
	if w > 0 {
		f.n.written(off, int64(w))
	}
	return w, errno
}

func (f *file) Fsync(ctx context.Context, flags uint32) syscall.Errno { return f.n.sync() }

func (f *file) Setattr(ctx context.Context, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if _, ok := in.GetSize(); ok {
		f.n.resized()
	}
	return f.LoopbackFile.Setattr(ctx, in, out)
}

func (f *file) Allocate(ctx context.Context, off, size uint64, mode uint32) syscall.Errno {
	f.n.resized()
	return f.LoopbackFile.Allocate(ctx, off, size, mode)
}

// Node operations: data goes to the cache; names go to both directories.

func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	fh, ff, errno := n.LoopbackNode.Open(ctx, flags)
	if errno == 0 && flags&syscall.O_TRUNC != 0 {
		n.resized()
	}
	return n.wrap(fh), ff, errno
}

func (n *node) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	ch, fh, ff, errno := n.LoopbackNode.Create(ctx, name, flags, mode, out)
	if errno != 0 {
		return ch, fh, ff, errno
	}
	_, disk, _ := n.paths(name)
	f, err := os.OpenFile(disk, os.O_WRONLY|os.O_CREATE, os.FileMode(mode)&0o777)
	if err == nil {
		err = f.Close()
	}
	if err != nil {
		return nil, nil, 0, fs.ToErrno(err)
	}
	child := ch.Operations().(*node)
	child.resized()
	return ch, child.wrap(fh), ff, 0
}

func (n *node) Setattr(ctx context.Context, fh fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if f, ok := fh.(*file); ok {
		return f.Setattr(ctx, in, out)
	}
	if _, ok := in.GetSize(); ok {
		n.resized()
	}
	return n.LoopbackNode.Setattr(ctx, fh, in, out)
}

func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	ch, errno := n.LoopbackNode.Mkdir(ctx, name, mode, out)
	if errno == 0 {
		_, disk, _ := n.paths(name)
		if err := os.Mkdir(disk, os.FileMode(mode)&0o777); err != nil && !errors.Is(err, os.ErrExist) {
			return nil, fs.ToErrno(err)
		}
	}
	return ch, errno
}

func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	errno := n.LoopbackNode.Unlink(ctx, name)
	if errno == 0 {
		_, disk, _ := n.paths(name)
		if err := os.Remove(disk); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fs.ToErrno(err)
		}
	}
	return errno
}

func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno {
	errno := n.LoopbackNode.Rmdir(ctx, name)
	if errno == 0 {
		_, disk, _ := n.paths(name)
		if err := os.RemoveAll(disk); err != nil {
			return fs.ToErrno(err)
		}
	}
	return errno
}

func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	np, ok := newParent.(*node)
	if !ok || flags != 0 {
		return syscall.ENOTSUP
	}
	_, from, _ := n.paths(name)
	_, to, _ := np.paths(newName)
	errno := n.LoopbackNode.Rename(ctx, name, newParent, newName, flags)
	if errno == 0 {
		if err := os.Rename(from, to); err != nil {
			return fs.ToErrno(err)
		}
	}
	return errno
}

// Link, Symlink, Mknod and CopyFileRange are not modelled.
func (n *node) Link(context.Context, fs.InodeEmbedder, string, *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return nil, syscall.ENOTSUP
}

func (n *node) Symlink(context.Context, string, string, *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return nil, syscall.ENOTSUP
}

func (n *node) Mknod(context.Context, string, uint32, uint32, *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return nil, syscall.ENOTSUP
}

func (n *node) CopyFileRange(context.Context, fs.FileHandle, uint64, *fs.Inode, fs.FileHandle, uint64, uint64, uint64) (uint32, syscall.Errno) {
	return 0, syscall.ENOTSUP
}

// Fsync of a directory (names are durable at once).
func (n *node) Fsync(ctx context.Context, fh fs.FileHandle, flags uint32) syscall.Errno {
	if f, ok := fh.(*file); ok {
		return f.Fsync(ctx, flags)
	}
	return 0
}

// copyTree copies the regular files and directories under src to dst.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(target, info.Mode().Perm()|0o700)
		}
		if !info.Mode().IsRegular() {
			return nil
		}
		in, err := os.Open(p)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, info.Mode().Perm())
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	})
}
