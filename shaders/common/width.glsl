// Raw element words of the byte-width families (b1/b2/b4/b8): moves never interpret the bits.
#ifndef FUELVK_WIDTH_GLSL
#define FUELVK_WIDTH_GLSL
#if WIDTH == 1
#extension GL_EXT_shader_8bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require
#define W uint8_t
#elif WIDTH == 2
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require
#define W uint16_t
#elif WIDTH == 4
#define W uint
#elif WIDTH == 8
#define W uvec2
#else
#error "WIDTH must be 1, 2, 4 or 8"
#endif
#endif
