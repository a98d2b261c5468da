//go:build !unix

package benchcore

// writeBack does nothing where there is no sync(2).
var writeBack = func() {}
