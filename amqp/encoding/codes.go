package encoding

// Format codes (types §1.6). Each names one encoding of one primitive type.
const (
	CodeDescribed  byte = 0x00
	CodeNull       byte = 0x40
	CodeBool       byte = 0x56
	CodeTrue       byte = 0x41
	CodeFalse      byte = 0x42
	CodeUbyte      byte = 0x50
	CodeUshort     byte = 0x60
	CodeUint       byte = 0x70
	CodeSmallUint  byte = 0x52
	CodeUint0      byte = 0x43
	CodeUlong      byte = 0x80
	CodeSmallUlong byte = 0x53
	CodeUlong0     byte = 0x44
	CodeByte       byte = 0x51
	CodeShort      byte = 0x61
	CodeInt        byte = 0x71
	CodeSmallInt   byte = 0x54
	CodeLong       byte = 0x81
	CodeSmallLong  byte = 0x55
	CodeFloat      byte = 0x72
	CodeDouble     byte = 0x82
	CodeDecimal32  byte = 0x74
	CodeDecimal64  byte = 0x84
	CodeDecimal128 byte = 0x94
	CodeChar       byte = 0x73
	CodeTimestamp  byte = 0x83
	CodeUUID       byte = 0x98
	CodeVbin8      byte = 0xa0
	CodeVbin32     byte = 0xb0
	CodeStr8       byte = 0xa1
	CodeStr32      byte = 0xb1
	CodeSym8       byte = 0xa3
	CodeSym32      byte = 0xb3
	CodeList0      byte = 0x45
	CodeList8      byte = 0xc0
	CodeList32     byte = 0xd0
	CodeMap8       byte = 0xc1
	CodeMap32      byte = 0xd1
	CodeArray8     byte = 0xe0
	CodeArray32    byte = 0xf0
)

// fixedWidth returns the width of a fixed-width encoding's value bytes, or -1
// when code is variable-width, compound, an array, or unknown.
func fixedWidth(code byte) int {
	switch code {
	case CodeNull, CodeTrue, CodeFalse, CodeUint0, CodeUlong0, CodeList0:
		return 0
	case CodeBool, CodeUbyte, CodeSmallUint, CodeSmallUlong, CodeByte, CodeSmallInt, CodeSmallLong:
		return 1
	case CodeUshort, CodeShort:
		return 2
	case CodeUint, CodeInt, CodeFloat, CodeDecimal32, CodeChar:
		return 4
	case CodeUlong, CodeLong, CodeDouble, CodeDecimal64, CodeTimestamp:
		return 8
	case CodeDecimal128, CodeUUID:
		return 16
	}
	return -1
}

// codeName names a format code for error messages.
func codeName(code byte) string {
	switch code {
	case CodeDescribed:
		return "described"
	case CodeNull:
		return "null"
	case CodeBool, CodeTrue, CodeFalse:
		return "boolean"
	case CodeUbyte:
		return "ubyte"
	case CodeUshort:
		return "ushort"
	case CodeUint, CodeSmallUint, CodeUint0:
		return "uint"
	case CodeUlong, CodeSmallUlong, CodeUlong0:
		return "ulong"
	case CodeByte:
		return "byte"
	case CodeShort:
		return "short"
	case CodeInt, CodeSmallInt:
		return "int"
	case CodeLong, CodeSmallLong:
		return "long"
	case CodeFloat:
		return "float"
	case CodeDouble:
		return "double"
	case CodeDecimal32:
		return "decimal32"
	case CodeDecimal64:
		return "decimal64"
	case CodeDecimal128:
		return "decimal128"
	case CodeChar:
		return "char"
	case CodeTimestamp:
		return "timestamp"
	case CodeUUID:
		return "uuid"
	case CodeVbin8, CodeVbin32:
		return "binary"
	case CodeStr8, CodeStr32:
		return "string"
	case CodeSym8, CodeSym32:
		return "symbol"
	case CodeList0, CodeList8, CodeList32:
		return "list"
	case CodeMap8, CodeMap32:
		return "map"
	case CodeArray8, CodeArray32:
		return "array"
	}
	return "unknown"
}
