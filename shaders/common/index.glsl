// Grid helpers: dispatches larger than maxComputeWorkGroupCount[0] are split over y (and z).
#ifndef FUELVK_INDEX_GLSL
#define FUELVK_INDEX_GLSL
uint linear_group() {
    return (gl_WorkGroupID.z * gl_NumWorkGroups.y + gl_WorkGroupID.y) * gl_NumWorkGroups.x + gl_WorkGroupID.x;
}
#endif
