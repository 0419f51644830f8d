Creator "knnwb"
Version 1
graph
[
  directed 0
  node
  [
    id 0
    label "a&amp;b"
    cluster 0
    clusterSize 2
    focus 1
    graphics
    [
      x -30.0
      y 0.0
      w 30.0
      h 30.0
      type "hexagon"
      fill "#FF0000"
      outline "#000000"
    ]
    LabelGraphics
    [
      text "a&amp;b"
      fontSize 18
    ]
  ]
  node
  [
    id 1
    label "&#233;"
    graphics
    [
      x 30.0
      y 0.0
      w 15.0
      h 15.0
      type "ellipse"
      fill "#E6A23B"
      outline "#404040"
    ]
  ]
  edge
  [
    source 0
    target 1
    distance 0.5
    weight 0.6666666666666666
    graphics
    [
      fill "#A0A0A0"
      width 1.5
    ]
  ]
]
