/* attograd_viz.h: pictures of graphs and attention (DOT, SVG).  Included by attograd.h. */
#ifndef ATTOGRAD_VIZ_H
#define ATTOGRAD_VIZ_H
#endif
